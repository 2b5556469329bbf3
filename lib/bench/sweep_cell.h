// One cell of sr-bench sweep: its training run and the result file it leaves.
// The result file (OUT/cells/.../result.json, written atomically when the run
// ends) is what makes a sweep resumable: a cell that has one is done.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "lib/bench/sweep_grid.h"

namespace srkit {

struct SweepCellResult {
  std::string strategy;
  double lr = 0.0;
  uint64_t seed = 0;
  std::string status = "ok";                // ok | diverged
  uint64_t diverged_step = 0;               // the step whose loss or gradient norm was not finite
  std::string message;                      // why it diverged
  double val_loss = 0.0, train_loss = 0.0;  // ok cells only
  uint64_t steps_done = 0, tokens = 0;
  double seconds = 0.0;                                  // wall time of the run
  std::vector<std::pair<uint64_t, double>> val_curve;    // (step, validation loss)
  std::vector<std::pair<uint64_t, double>> train_curve;  // (step, training loss)
  nlohmann::json config;  // the cell's TrainConfig::to_json(): a resumed sweep must match it
  // Where it ran (lib/bench/sweep_carry.h): device, build, numerics probe; null
  // in results written before carry-over existed.
  nlohmann::json environment;
  std::string carried_from;  // the --carry folder it was taken from, if any
  bool ok() const { return status == "ok"; }
  nlohmann::json to_json() const;
  static SweepCellResult from_json(const nlohmann::json& j);  // throws on a malformed record
};

// Runs the cell's training in this process and writes its result file. A
// diverged run is a result too. Throws on any other failure (then no result
// file is written, so a rerun of the sweep tries the cell again); returns
// false, writing nothing, when a stop signal interrupted the run.
bool run_sweep_cell(const SweepOptions& options, const SweepCell& cell);

// The cell's result file, or nothing when it has none. Throws naming the file
// when it is unreadable, or when its configuration (portable_config) is not
// this sweep's (the folder holds another sweep: mixing them would be wrong).
bool read_cell_result(const SweepOptions& options, const SweepCell& cell, SweepCellResult& out);

// A cell's configuration as compared between folders and machines:
// TrainConfig::to_json with --data and --val-data by file name (their paths
// differ between machines; lib/bench/sweep_carry.h's numerics probe compares
// their contents).
nlohmann::json portable_config(const nlohmann::json& config);

// The step a TrainingDiverged message names ("... at step N ..."); 0 if none.
uint64_t diverged_step_of(const std::string& message);

}  // namespace srkit
