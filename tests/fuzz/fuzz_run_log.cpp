// libFuzzer harness: the sr-train JSONL log reader (sr-audit run/plot) on
// arbitrary file bytes. A bad log must be a one-line std::invalid_argument; an
// accepted one must summarise and print without error.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "lib/audit/run_log.h"
#include "tests/fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static srkit::fuzz::MemoryFile file;
  const std::string& path = file.holding(data, size);
  srkit::audit::RunLog log;
  try {
    log = srkit::audit::read_run_log(path);
  } catch (const std::invalid_argument& e) {
    srkit::fuzz::require_one_line(e.what());
    return 0;
  }
  for (const std::string& w : log.warnings) srkit::fuzz::require_one_line(w.c_str());
  const srkit::audit::RunSummary summary = srkit::audit::summarize(log, 4, 0.5);
  srkit::audit::telemetry_markdown({summary});
  srkit::audit::shadow_markdown({summary});
  return 0;
}
