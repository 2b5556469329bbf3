// A resumed run must be the run its checkpoint belongs to: the same data, batch,
// schedule and optimizer settings, or its steps would silently mix two
// experiments. Fields that may differ between the two halves of one run (output
// paths, logging and evaluation cadence, threads, device, world size and ZeRO
// stage: checkpoints are world-size independent) are not compared. The user
// accepts a deliberate change with --resume-override NAME,... (e.g. "steps" to
// extend a run).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace srkit {

// The names --resume-override accepts.
const std::vector<std::string>& resume_override_names();

// Throws std::invalid_argument naming --resume-override for an unknown name.
void check_resume_override_names(const std::vector<std::string>& names);

// saved: the config JSON a checkpoint holds; now: this run's (both from
// TrainConfig::to_json plus the data fingerprint, see Trainer). Returns
// "lr (checkpoint 0.001, this run 0.003)" for each compared field that
// differs and is not overridden. Fields missing on either side (older
// checkpoints) are not compared.
std::vector<std::string> resume_config_differences(const nlohmann::json& saved,
                                                   const nlohmann::json& now,
                                                   const std::vector<std::string>& overrides);

// Throws std::invalid_argument naming the checkpoint and every differing field.
void check_resume_config(const std::string& checkpoint, const nlohmann::json& saved,
                         const nlohmann::json& now, const std::vector<std::string>& overrides);

}  // namespace srkit
