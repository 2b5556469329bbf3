// sr-bench sweep, the reports: final validation loss per strategy x learning
// rate (mean and standard error over seeds), each strategy's best learning
// rate, its loss against mixed precision's best, and how far the learning
// rate can grow while staying within 1% of the best, and each strategy's
// paired difference from mixed at each learning rate (same seed, same
// batches); as Markdown, CSV, JSON and two SVG charts (loss vs learning rate,
// loss curves at the best rate).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/bench/sweep_cell.h"
#include "lib/bench/sweep_grid.h"

namespace srkit {

// One strategy at one learning rate, over its seeds.
struct SweepPoint {
  std::string strategy;
  double lr = 0.0;
  int seeds = 0;                     // cells
  int diverged = 0;                  // of them, diverged
  uint64_t first_diverged_step = 0;  // earliest divergence, 0 if none
  double mean = 0.0, se = 0.0;       // final val loss over the seeds that finished
  // Mean and standard error over seeds of (this cell's loss - mixed's loss at
  // the same lr and seed), over the seeds where both finished: the seed fixes
  // the data order and initialisation, so the pairing removes their share of
  // the spread. paired_seeds = 0: no mixed in the grid, or no such seed.
  int paired_seeds = 0;
  double paired_mean = 0.0, paired_se = 0.0;
  // The point counts (best lr, charts) only when every seed finished.
  bool complete() const { return seeds > 0 && diverged == 0; }
};

struct SweepStrategySummary {
  std::string strategy;
  bool has_best = false;  // some learning rate where every seed finished
  double best_lr = 0.0, best_loss = 0.0;
  double vs_mixed = -1.0;  // best_loss / mixed's best_loss; < 0: no mixed in the grid
  // The largest learning rate whose complete point is within 1% of best_loss.
  double largest_lr_within_1pct = 0.0;
};

struct SweepTable {
  std::vector<std::string> strategies;  // grid order
  std::vector<double> lrs;              // grid order
  std::vector<SweepPoint> points;       // strategy-major: points[s * lrs.size() + l]
  std::vector<SweepStrategySummary> summaries;
  const SweepPoint& at(size_t s, size_t l) const { return points[s * lrs.size() + l]; }
};

// Within this fraction of a strategy's best loss counts as "as good as the best".
inline constexpr double kNearBest = 0.01;

SweepTable summarize_sweep(const SweepOptions& options, const std::vector<SweepCellResult>& cells);

std::string sweep_markdown(const SweepOptions& options, const SweepTable& table,
                           const std::string& ablated, const std::vector<Ablation>& ablations);
std::string sweep_csv(const std::vector<SweepCellResult>& cells);
nlohmann::json sweep_json(const SweepOptions& options, const SweepTable& table,
                          const std::vector<SweepCellResult>& cells);
// Validation loss vs learning rate (log x), one line per strategy; each
// point's standard error is drawn as a vertical stroke of the strategy's own
// line (the polyline goes up to mean + se, down to mean - se and back), so a
// strategy stays exactly one series. Throws std::invalid_argument when no
// point is complete.
std::string sweep_lr_svg(const SweepTable& table);
// Validation loss vs step of each strategy at its best learning rate, mean
// over seeds. Throws std::invalid_argument when no strategy has a best rate.
std::string sweep_curves_svg(const SweepTable& table, const std::vector<SweepCellResult>& cells);

}  // namespace srkit
