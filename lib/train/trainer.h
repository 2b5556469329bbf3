// The training loop: data, model, optimizer, schedule, evaluation, telemetry,
// checkpoints and signals, for one strategy, on one rank or data parallel over
// the ranks of a Communicator (docs/distributed.md). sr-train runs one Trainer,
// or one per strategy with --compare.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/backend/backend.h"
#include "lib/comm/communicator.h"
#include "lib/profiling.h"
#include "lib/train/train_config.h"
#include "lib/util/stop_signal.h"

namespace srkit {

// A run that cannot go on (non-finite loss or gradient norm). The last good
// checkpoint is left as it was.
struct TrainingDiverged : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RunSummary {
  std::string strategy;
  std::string model;
  size_t num_params = 0;
  double bytes_per_param = 0.0;
  uint64_t steps_done = 0;
  uint64_t steps_total = 0;
  // data parallelism: this rank, the world, and the time spent in collectives
  int rank = 0;
  int world_size = 1;
  std::string comm = "single";
  int zero = 0;
  std::string sr_seed = "shared";
  double comm_seconds = 0.0;  // this run's share of Communicator::comm_seconds()
  double train_loss = 0.0;    // mean over the last 10 steps
  double val_loss = -1.0;     // < 0: no validation data
  double val_ppl = -1.0;
  double tokens_per_s = 0.0;                // global: all ranks together
  double train_seconds = 0.0;               // optimizer steps only (no eval, no checkpoints)
  MemoryStats memory{};                     // this rank's backend
  std::vector<size_t> peak_bytes_per_rank;  // every rank's memory.total_peak, rank order
  std::string checkpoint;                   // last checkpoint written, if any
  std::string log_file;
  std::string sample;           // generated text (bytes; printable form)
  std::vector<double> step_ms;  // wall time of each optimizer step of this run
  PhaseTimers phases;           // forward, backward, optimizer, eval, checkpoint, ...
  bool interrupted = false;     // stopped by SIGINT/SIGTERM (on any rank)
  int stop_signal = 0;          // the signal that stopped the run, 0 if none
  // Replica checks run (every --replica-check steps with world > 1) and the
  // largest divergence from rank 0 they saw, in ulps of the weight dtype.
  int replica_checks = 0;
  uint64_t replica_max_ulps = 0;
  uint64_t weights_checksum = 0;  // checksum_bytes of this rank's final weights
  // The execution model, audited over this run's steps after its first
  // (docs/architecture.md): backend allocations (0 when it holds) and host reads
  // (one per step, plus evaluations, checkpoints and probes when they run).
  uint64_t allocations_after_first_step = 0;
  uint64_t host_reads_after_first_step = 0;
  nlohmann::json to_json() const;
};

class Trainer {
 public:
  // Creates its own communicator from config.comm / config.comm_timeout when run
  // starts. MPI can be initialised only once per process, so a program that runs
  // several Trainers in one MPI job creates one communicator and passes it in
  // (config.comm and config.comm_timeout are then not used). Errors are thrown
  // on the rank that sees them; errors every rank sees alike (bad config, ranks
  // that disagree, divergence) are thrown on every rank.
  explicit Trainer(TrainConfig config);
  Trainer(TrainConfig config, Communicator& comm);
  ~Trainer();
  // Runs to the end, or until a signal (then checkpoints and returns with
  // interrupted = true). Throws std::invalid_argument / std::runtime_error on
  // bad input, TrainingDiverged on a non-finite loss.
  RunSummary run();

 private:
  class State;
  TrainConfig config_;
  Communicator* comm_ = nullptr;  // given, or owned by state_
  std::unique_ptr<State> state_;
};

// SIGINT/SIGTERM: install_stop_handlers() and stop_signal() are in
// lib/util/stop_signal.h. A signal stops a running Trainer after the current
// step (with a checkpoint); data-parallel ranks exchange the flag every step,
// so a signal to any rank stops all of them after the same step.

}  // namespace srkit
