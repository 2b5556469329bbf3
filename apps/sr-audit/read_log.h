// Reading an sr-train log for an sr-audit subcommand (run, plot).
#pragma once

#include <string>

#include "lib/audit/run_log.h"

namespace srkit::audit_app {

// audit::read_run_log, with its warnings (a cut-off last line) on stderr as
// "sr-audit: warning: ..." lines.
audit::RunLog read_log_showing_warnings(const std::string& path);

}  // namespace srkit::audit_app
