// Helpers shared by the single-process and the MPI training tests.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "lib/checkpoint/safetensors.h"
#include "lib/train/train_config.h"

namespace srkit::testing_train {

// A few-second run of the tiny preset on the synthetic corpus, writing into out.
inline TrainConfig tiny_config(const std::filesystem::path& out, const std::string& strategy,
                               uint64_t steps) {
  TrainConfig c;
  c.model = "tiny";
  c.strategy = strategy_from_string(strategy);
  c.batch = 4;
  c.seq_len = 32;
  c.steps = steps;
  c.lr = 3e-3f;
  c.warmup = 2;
  c.eval_interval = 0;
  c.eval_batches = 2;
  c.synthetic_bytes = 64 << 10;
  c.sample_tokens = 0;
  c.quiet = true;
  c.out_dir = out.string();
  return c;
}

// Every tensor of a checkpoint file, as bytes, by name: two runs agree bit for
// bit exactly when these maps are equal.
inline std::map<std::string, std::vector<char>> read_all(const std::string& path) {
  SafetensorsReader r(path);
  std::map<std::string, std::vector<char>> out;
  for (const std::string& name : r.names()) {
    std::vector<char> bytes(r.info(name).nbytes);
    r.read(name, bytes.data(), bytes.size());
    out[name] = std::move(bytes);
  }
  return out;
}

}  // namespace srkit::testing_train
