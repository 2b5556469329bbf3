// Training runs made for measuring, not for learning: the real training loop
// (srkit::Trainer) on the built-in synthetic corpus, with no evaluation,
// checkpoints, samples or progress lines, logging into a throw-away directory.
#pragma once

#include <cstdint>
#include <string>

#include "lib/model/gpt_config.h"
#include "lib/train/train_config.h"
#include "lib/train/trainer.h"

namespace srkit {

struct BenchRunSettings {
  std::string device = "cpu";
  int threads = 0;
  uint64_t seed = 1337;
  // Backend allocation limit (0: none): past it the run throws OutOfMemory,
  // which is how sr-bench plants an out-of-memory cell.
  size_t mem_limit_bytes = 0;
  // Device time per phase (TrainConfig::sync_phases), for --phases.
  bool sync_phases = false;
  // Micro-batches per optimizer step (TrainConfig::grad_accum) and activation
  // recomputation (TrainConfig::recompute "layer").
  int grad_accum = 1;
  bool recompute = false;
};

// A TrainConfig whose model_config() has exactly `model`'s shape (its preset
// when model.name is one, with every shape field set as an override), for a
// measuring run of `steps` optimizer steps.
TrainConfig bench_train_config(const GPTConfig& model, const PrecisionStrategy& strategy, int batch,
                               int seq_len, uint64_t steps, const BenchRunSettings& settings,
                               const std::string& out_dir);

// Runs bench_train_config(...) in a temporary directory (removed afterwards).
RunSummary run_bench_training(const GPTConfig& model, const PrecisionStrategy& strategy, int batch,
                              int seq_len, uint64_t steps, const BenchRunSettings& settings);

}  // namespace srkit
