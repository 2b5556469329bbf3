// sr-train's JSONL log (one object per line: "config", "step", "eval",
// "shadow", "summary", ...) read back for `sr-audit run` and `sr-audit plot`,
// and the rounding-telemetry summary over time: how many updates were erased
// (below half a bf16 ulp), the update/weight ratio, how often m and v stalled,
// the Shadow-FP32 drift, and flags for stagnation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace srkit::audit {

// One tensor group's telemetry of a step (the step record's optional "groups").
struct GroupStepRecord {
  std::string group;  // "embeddings", "attention", ...
  double erased_frac = 0, update_weight_ratio = 0;
};
struct StepRecord {
  uint64_t step = 0;
  double loss = 0, lr = 0, grad_norm = 0, update_weight_ratio = 0;
  double erased_frac = 0, m_stalled_frac = 0, v_stalled_frac = 0;
  std::vector<GroupStepRecord> groups;  // empty when the record has none (older logs)
};
struct EvalRecord {
  uint64_t step = 0;
  double val_loss = 0;
};
struct ShadowRecord {
  uint64_t step = 0;
  double mean_abs_ulps = 0, max_abs_ulps = 0, rel_drift = 0;
};

struct RunLog {
  std::string path;
  std::string strategy;  // from the "config" line ("?" when absent)
  std::vector<StepRecord> steps;
  std::vector<EvalRecord> evals;
  std::vector<ShadowRecord> shadows;
  // Problems that did not stop the read, one line each naming the file (a last
  // line cut short by a killed writer); the caller shows them.
  std::vector<std::string> warnings;
};

// Reads one log (a regular file only: lib/util/regular_file.h). Lines of other
// types are skipped; a line that is not JSON, or a known type missing a numeric
// field, is an error. Steps must be integers in [0, 2^64); a number beyond the
// double range (1e309) is an error naming its field. A step's "groups", when
// present, must be an object of objects with numeric erased_frac in [0, 1] and
// update_weight_ratio >= 0. A last line that has no newline and does not parse
// (the writer was killed mid-line) is dropped with a warning in
// RunLog::warnings. Throws std::invalid_argument "PATH:LINE: what" (or "sr-train
// log 'PATH': is a directory", "PATH: no step records") so bad input exits with
// code 2.
RunLog read_run_log(const std::string& path);

// Telemetry averaged over one window of steps.
struct WindowSummary {
  uint64_t first_step = 0, last_step = 0;
  double loss = 0, erased_frac = 0, update_weight_ratio = 0, m_stalled_frac = 0, v_stalled_frac = 0;
};

struct RunSummary {
  std::string path, strategy;
  std::vector<WindowSummary> windows;  // consecutive, equal numbers of steps
  std::vector<std::string> flags;  // e.g. "weights stagnate: 63% of updates erased (last window)"
  bool has_shadow = false;
  ShadowRecord last_shadow;
  double mean_shadow_ulps = 0;  // mean over shadow lines of mean_abs_ulps
};

// Throws std::invalid_argument for windows < 1 or a threshold outside (0, 1].
RunSummary summarize(const RunLog& log, int windows, double stall_threshold);

std::string telemetry_markdown(const std::vector<RunSummary>& runs);
std::string shadow_markdown(const std::vector<RunSummary>& runs);  // runs with shadow lines

}  // namespace srkit::audit
