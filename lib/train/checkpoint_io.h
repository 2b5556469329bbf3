// Training checkpoints: the model's weights as named tensors, the optimizer's
// state as flat buffers, and the run's config, step, data position and seed in
// the safetensors metadata. Written atomically (see lib/checkpoint).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "lib/checkpoint/checkpoint_dir.h"  // checkpoint_path, latest_checkpoint
#include "lib/model/gpt.h"
#include "lib/train/optimizer.h"

namespace srkit {

struct CheckpointInfo {
  uint64_t step = 0;         // optimizer steps completed
  uint64_t data_cursor = 0;  // global batches consumed (= step: batches are a pure function of it)
  uint64_t seed = 0;
  std::string strategy;
  nlohmann::json config;  // the TrainConfig as JSON
};

void save_checkpoint(const std::string& path, GPT& model, const Optimizer& optimizer,
                     const CheckpointInfo& info);

// Reads only the metadata (to check shapes before allocating anything).
CheckpointInfo read_checkpoint_info(const std::string& path);

// Restores weights and optimizer state; checks that the checkpoint was written
// for this model shape and strategy, naming the mismatch otherwise.
CheckpointInfo load_checkpoint(const std::string& path, GPT& model, Optimizer& optimizer);

// A checkpoint file, or the latest ckpt_*.safetensors in a directory.
std::string resolve_checkpoint(const std::string& file_or_dir);

}  // namespace srkit
