#include "apps/sr-audit/read_log.h"

#include <cstdio>

namespace srkit::audit_app {

audit::RunLog read_log_showing_warnings(const std::string& path) {
  audit::RunLog log = audit::read_run_log(path);
  for (const std::string& w : log.warnings)
    std::fprintf(stderr, "sr-audit: warning: %s\n", w.c_str());
  return log;
}

}  // namespace srkit::audit_app
