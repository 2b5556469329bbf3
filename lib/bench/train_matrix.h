// sr-bench train: a matrix of model presets x micro-batch sizes x precision
// strategies, each cell a short training run through the real training loop
// (srkit::Trainer on synthetic data): warm-up steps, then timed steps.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "lib/backend/backend.h"
#include "lib/bench/peak_rate.h"
#include "lib/precision.h"

namespace srkit {

struct TrainMatrixOptions {
  std::vector<std::string> models{"tiny"};
  std::vector<PrecisionStrategy> strategies;  // parsed by the CLI; empty: every preset
  std::vector<int> batches{4};
  int seq_len = 0;  // 0: each model's maximum, at most kDefaultSeqLen
  int steps = 5;    // timed optimizer steps per cell
  int warmup = 2;   // untimed steps before them
  std::string device = "cpu";
  int threads = 0;             // 0: OpenMP default
  size_t mem_limit_bytes = 0;  // planted allocation limit; 0: none
  double peak_gflops = 0.0;    // > 0 overrides the measured / datasheet peak
  bool sync_phases = false;    // device time per phase (--phases)
  uint64_t seed = 1337;

  static constexpr int kDefaultSeqLen = 256;
  // The sequence length cells of `model` run at.
  int seq_len_for(int model_max_seq_len) const;
  // Throws std::invalid_argument naming the flag; fills in default strategies.
  void validate_and_complete();
};

struct CellResult {
  std::string model, strategy;
  int batch = 0, seq_len = 0;
  int grad_accum = 1;         // micro-batches per optimizer step (ms/step and tok/s count them all)
  bool recompute = false;     // sr-train --recompute layer
  std::string status = "ok";  // ok | OOM | diverged
  std::string message;        // why, when not ok
  size_t num_params = 0;
  double state_bytes_per_param = 0.0;  // measured (weights+master+grads+opt state) / params
  double step_flops = 0.0;             // lib/bench/flops.h
  double ms_median = 0.0, ms_min = 0.0, ms_max = 0.0;  // timed steps only
  double tokens_per_s = 0.0, gflops = 0.0, mfu = 0.0;  // at the median step
  double peak_gflops = 0.0;   // what mfu divides by: the peak of the strategy's compute dtype
  MemoryStats memory{};       // backend accounting, peak by category
  size_t rss_peak_bytes = 0;  // VmHWM
  int timed_steps = 0;
  // Mean ms per step of each phase (forward, backward, optimizer, communication
  // ...) over all steps of the cell, warm-up included: the Trainer's timers
  // cover the whole run.
  std::map<std::string, double> phase_ms;
  double phase_step_ms = 0.0;  // mean step time over the same steps
  // Against the `mixed` cell of the same model and batch; < 0: none to compare.
  double speedup_vs_mixed = -1.0;  // mixed's median ms / this median ms
  double memory_vs_mixed = -1.0;   // this peak / mixed's peak (backend total)
  bool ok() const { return status == "ok"; }
};

struct TrainMatrixResult {
  TrainMatrixOptions options;
  std::string backend;  // Backend::description()
  // The peak of each compute dtype the strategies use (PrecisionStrategy::compute):
  // a bf16 step's MFU is against the bf16 GEMM rate, an fp32 step's against fp32's.
  std::map<DType, PeakRate> peaks;
  bool rss_per_cell = false;  // VmHWM reset before each cell (else cumulative)
  std::vector<CellResult> cells;
};

// What a cell runs beyond the matrix options: the micro-batch, the micro-batches
// accumulated per optimizer step, and activation recomputation.
struct CellShape {
  int batch = 1;
  int grad_accum = 1;
  bool recompute = false;
};

// One cell: o.warmup + o.steps optimizer steps of `model` (a preset) under
// `strategy` at `shape`, timed; an allocation over o.mem_limit_bytes (or a failed
// host allocation) gives status "OOM", a diverged run "diverged". peak_gflops:
// the peak of strategy.compute, what MFU divides by.
CellResult run_train_cell(const TrainMatrixOptions& o, const std::string& model,
                          const PrecisionStrategy& strategy, const CellShape& shape,
                          double peak_gflops);

// The peak rate of each compute dtype o's strategies use, and the backend's
// description (validates o.device and sets the threads the probe runs with).
std::map<DType, PeakRate> strategy_peaks(const TrainMatrixOptions& o, std::string* backend);

// Runs every cell (models, then batches, then strategies), one progress line
// per cell start and end on `progress` (may be null). A cell over the planted
// limit (or out of host memory) is reported "OOM" and the rest still run.
TrainMatrixResult run_train_matrix(TrainMatrixOptions options, std::FILE* progress);

// "bf16 989000.0 GFLOP/s (datasheet dense bf16: ...), f32 67000.0 GFLOP/s (...)":
// the peaks MFU is measured against, for the progress line and the table footer.
std::string peaks_text(const TrainMatrixResult& r);

// Fills speedup_vs_mixed / memory_vs_mixed from the matrix's mixed cells.
void compare_with_mixed(std::vector<CellResult>& cells);

}  // namespace srkit
