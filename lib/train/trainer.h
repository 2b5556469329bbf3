// The training loop: data, model, optimizer, schedule, evaluation, telemetry,
// checkpoints and signals, for one strategy. sr-train runs one Trainer, or one
// per strategy with --compare.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/backend/backend.h"
#include "lib/profiling.h"
#include "lib/train/train_config.h"

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
  double train_loss = 0.0;  // mean over the last 10 steps
  double val_loss = -1.0;   // < 0: no validation data
  double val_ppl = -1.0;
  double tokens_per_s = 0.0;
  double train_seconds = 0.0;  // optimizer steps only (no eval, no checkpoints)
  MemoryStats memory{};
  std::string checkpoint;  // last checkpoint written, if any
  std::string log_file;
  std::string sample;           // generated text (bytes; printable form)
  std::vector<double> step_ms;  // wall time of each optimizer step of this run
  PhaseTimers phases;           // forward, backward, optimizer, eval, checkpoint, ...
  bool interrupted = false;     // stopped by SIGINT/SIGTERM
  nlohmann::json to_json() const;
};

class Trainer {
 public:
  explicit Trainer(TrainConfig config);
  ~Trainer();
  // Runs to the end, or until a signal (then checkpoints and returns with
  // interrupted = true). Throws std::invalid_argument / std::runtime_error on
  // bad input, TrainingDiverged on a non-finite loss.
  RunSummary run();

 private:
  struct State;
  TrainConfig config_;
  std::unique_ptr<State> state_;
};

// Installs SIGINT/SIGTERM handlers that ask running Trainers to stop after the
// current step (the handler only sets a flag). Returns the signal seen, or 0.
void install_stop_handlers();
int stop_signal();

}  // namespace srkit
