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
};

// Reads one log. Lines of other types are skipped; a line that is not a JSON
// object, or a known type missing a numeric field, is an error. A step's
// "groups", when present, must be an object of objects with numeric
// erased_frac in [0, 1] and update_weight_ratio >= 0. Throws
// std::invalid_argument "PATH:LINE: what" (or "PATH: cannot read", "PATH: no
// step records") so bad input exits with code 2.
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
