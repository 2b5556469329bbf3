// sr-train's two modes: one run, or the same run once per strategy (--compare).
#pragma once

#include <string>

#include "lib/comm/communicator.h"
#include "lib/train/train_config.h"

namespace srkit {

// Each returns the process exit code: 0, or 128 + signal when interrupted. Only
// rank 0 prints tables and writes files; the other ranks train quietly.
int run_single(const TrainConfig& config, Communicator& comm, const std::string& json_path);
int run_compare(const TrainConfig& config, Communicator& comm, const std::string& strategies,
                const std::string& json_path);

}  // namespace srkit
