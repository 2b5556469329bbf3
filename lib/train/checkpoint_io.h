// Training checkpoints: the model's weights as named tensors, the optimizer's
// state as flat buffers, and the run's config, step, data position and seed in
// the safetensors metadata. Written atomically (see lib/checkpoint).
//
// A checkpoint does not depend on the world size: the optimizer state is always
// stored for the whole flat buffer (ZeRO-1 runs gather their shards first), and a
// run that loads it takes the part its optimizer covers. So a checkpoint written
// by 2 ranks resumes on 1 and vice versa, with or without ZeRO-1.
#pragma once

#include <string>
#include <vector>

#include "lib/checkpoint/checkpoint_dir.h"  // checkpoint_path, latest_checkpoint
#include "lib/model/gpt.h"
#include "lib/train/checkpoint_metadata.h"  // CheckpointInfo, the metadata format
#include "lib/train/optimizer.h"

namespace srkit {

// One optimizer state buffer (Optimizer::StateBuffer) on the host.
struct HostStateBuffer {
  std::string name;   // "master", "adam_m", ...
  std::string dtype;  // safetensors dtype
  std::vector<char> bytes;
};

// The optimizer's state over its own range [begin, end), copied to the host.
std::vector<HostStateBuffer> optimizer_state_to_host(const Optimizer& optimizer);

// state: every state buffer over the whole flat buffer [0, total_size).
void save_checkpoint(const std::string& path, GPT& model, const std::vector<HostStateBuffer>& state,
                     const CheckpointInfo& info);
// The optimizer must cover the whole flat buffer.
void save_checkpoint(const std::string& path, GPT& model, const Optimizer& optimizer,
                     const CheckpointInfo& info);

// Reads only the metadata (to check shapes before allocating anything), parsed
// and range-checked by parse_checkpoint_metadata.
CheckpointInfo read_checkpoint_info(const std::string& path);

// A checkpoint's weights on the host, without a backend or an optimizer (sr-export).
struct CheckpointWeights {
  CheckpointInfo info;
  GPTConfig model;         // the shape recorded in the metadata
  DType dtype;             // the weights' storage dtype
  std::vector<char> flat;  // the flat parameter buffer of ParamLayout(model), padding zero
};
CheckpointWeights read_checkpoint_weights(const std::string& path);

// Restores the weights and the optimizer's range [begin, end) of its state.
// Checks, each failure one line naming the file (and the tensor): the
// metadata (parse_checkpoint_metadata), that the checkpoint was written for
// this model shape and strategy, every tensor's bytes against its saved
// checksum, and the values (lib/checkpoint/value_check.h: weights and float
// state finite, adam_v also >= 0, naming the first bad index).
CheckpointInfo load_checkpoint(const std::string& path, GPT& model, Optimizer& optimizer);

// A checkpoint file, or the latest ckpt_*.safetensors in a directory. Throws
// "--resume 'PATH': is a FIFO (expected a regular file)" (does not exist, is a
// socket, ...) for anything that is neither.
std::string resolve_checkpoint(const std::string& file_or_dir);

}  // namespace srkit
