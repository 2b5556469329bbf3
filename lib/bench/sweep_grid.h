// sr-bench sweep, the grid: precision strategies x peak learning rates x seeds
// on one model, data set and token budget. Each cell is a real training run
// (srkit::Trainer) in its own folder OUT/cells/<strategy>/lr<lr>/seed<seed>/;
// the seed drives initialisation, data order and SR bits, so every strategy
// of a seed sees the same batches in the same order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/precision.h"
#include "lib/train/train_config.h"

namespace srkit {

struct SweepOptions {
  // Model, data, batch, length, schedule, AdamW settings and device of every
  // cell; strategy, lr, seed, output paths and evaluation interval are set per cell.
  TrainConfig base;
  std::vector<PrecisionStrategy> strategies;  // parsed once (parse_strategy_list)
  std::vector<double> lrs;
  std::vector<uint64_t> seeds;
  std::string out_dir;
  int jobs = 1;           // cells run at once, each in its own process
  int threads = 0;        // CPU threads of the whole sweep; 0: all the machine has
  int curve_points = 10;  // evaluations per run (the loss curves)
  // Folders of the same grid's cells finished elsewhere (lib/bench/sweep_carry.h).
  std::vector<std::string> carry_from;
  // This machine's environment record, set by run_sweep and written into every
  // result (lib/bench/sweep_carry.h); null until probed.
  nlohmann::json environment;
  // Throws std::invalid_argument naming the flag.
  void validate() const;
  // Threads each cell runs with: the sweep's threads split over the jobs.
  int threads_per_cell() const;
  // Steps between evaluations of a cell: the run cut into curve_points pieces.
  int eval_interval() const;
};

// The components of a strategy the paper's argument rests on, each as one
// strategy next to PRESET: SR on the moments, v in fp32, gradients in fp32,
// Kahan-compensated round-to-nearest instead of SR, and mixed precision with
// bf16 moments. A component that does not apply to PRESET (SR on fp32
// moments, fp32 gradients of a preset that has them) is listed with `why` and
// no spec.
struct Ablation {
  std::string spec;  // empty: not expressible
  std::string what;
  std::string why;  // when not expressible
};
// Throws std::invalid_argument naming --ablate when PRESET is not a preset name.
std::vector<Ablation> ablations_of(const std::string& preset);

struct SweepCell {
  PrecisionStrategy strategy;
  double lr = 0.0;
  uint64_t seed = 0;
  std::string dir;  // OUT/cells/<strategy folder>/lr<lr>/seed<seed>
  std::string result_file() const { return dir + "/result.json"; }
  std::string log_file() const { return dir + "/log.jsonl"; }
  std::string output_file() const { return dir + "/output.txt"; }
};

// Every cell: seeds outermost, then strategies, then learning rates.
std::vector<SweepCell> sweep_cells(const SweepOptions& options);

// A strategy spec as a folder name: ':' -> '@', ',' -> '+' (specs use neither).
std::string strategy_folder(const std::string& spec);
// A learning rate as text, shortest form that reads back to the same double.
std::string lr_text(double lr);

// The training configuration of one cell (what its child process runs).
TrainConfig cell_config(const SweepOptions& options, const SweepCell& cell);

}  // namespace srkit
