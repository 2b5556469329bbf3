// The picture of `sr-train --compare` (compare.svg): validation and training
// loss against tokens, one line per strategy, and peak memory by category,
// as panels of one SVG figure.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/audit/run_log.h"
#include "lib/backend/backend.h"
#include "lib/util/svg.h"

namespace srkit {

// What the figure shows of one strategy's run.
struct CompareCurves {
  std::string strategy;
  std::vector<double> step_tokens, step_loss;          // training loss of each logged step
  std::vector<double> eval_tokens, eval_loss;          // validation loss of each evaluation
  std::array<size_t, kNumMemCategories> peak_bytes{};  // per-category high-water marks
};

// A run's curves from its JSONL log: a record of step s is at s x
// tokens_per_step tokens (the log's "tokens" field; evaluations have none).
CompareCurves compare_curves(const std::string& strategy, const audit::RunLog& log,
                             uint64_t tokens_per_step, const MemoryStats& memory);

// The training loss is noisy (one micro-batch per step): the chart draws its
// exponential moving average over the logged steps, m_i = f m_(i-1) +
// (1 - f) y_i from m_(-1) = 0 with f = kLossEmaFactor (about the last 10
// records), divided by 1 - f^(i+1) as Adam corrects its moments: the sum of
// the weights, so the curve starts at y_0 and follows the fast early drop
// instead of lagging from it. The raw values are drawn faint underneath.
constexpr double kLossEmaFactor = 0.9;
std::vector<double> ema(const std::vector<double>& y, double factor);

// Panels top to bottom: validation loss (when a run has evaluations; a dot per
// evaluation), training loss (when a run has step records), and peak memory
// by category per strategy (stacked bars in MiB, the sum noted at the end).
// Strategies keep one colour in every panel.
svg::Figure compare_figure(const std::string& title, const std::vector<CompareCurves>& runs);

}  // namespace srkit
