// Everything a training run is configured by. sr-train fills it from flags;
// checkpoints store it; --compare copies it once per strategy.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/model/gpt_config.h"
#include "lib/precision.h"
#include "lib/train/optimizer.h"
#include "lib/train/schedule.h"

namespace srkit {

struct TrainConfig {
  // model: a preset plus overrides (0 = keep the preset's value). With
  // init_from the folder's config.json gives the shape, and a preset (empty:
  // none) or override given as well must agree with it.
  std::string model = "d4";
  int layers = 0, channels = 0, heads = 0, vocab = 0, max_seq_len = 0;
  PrecisionStrategy strategy = strategy_from_string("bf16-sr");  // parsed once, by the CLI
  std::string device = "cpu";
  int threads = 0;  // 0 = OpenMP default

  // data: empty = the built-in synthetic corpus
  std::string data;
  std::string val_data;  // separate validation data; else the tail of `data`
  double val_fraction = 0.1;
  size_t synthetic_bytes = 1 << 21;

  // batch and length of the run
  int batch = 8;         // sequences per micro-batch
  int seq_len = 128;     // tokens per sequence
  int grad_accum = 1;    // micro-batches per optimizer step
  uint64_t steps = 200;  // optimizer steps (or derived from tokens)
  uint64_t tokens = 0;   // if > 0: steps = ceil(tokens / tokens per step)
  // Activation recomputation: "none", or "layer" (GPT::set_recompute: each
  // layer's input kept, its activations recomputed in backward). The same bits
  // either way, so it is not part of to_json (a resume may change it); the
  // run's provenance records it.
  std::string recompute = "none";

  // optimizer
  float lr = 1e-3f;
  float min_lr = -1.0f;  // < 0: lr / 10 (GPT-2 practice)
  uint64_t warmup = 0;
  std::string schedule = "cosine";
  AdamWSettings adamw{};
  uint64_t seed = 1337;

  // evaluation and output
  int eval_interval = 50;  // steps; 0 = only at the end
  int log_interval = 1;    // steps between JSONL step records (and optimizer telemetry)
  int eval_batches = 8;
  bool final_eval = true;        // evaluate once more when the run ends
  std::string out_dir = "runs";  // default home of logs, checkpoints, tables
  std::string log_file;          // JSONL; default OUT/<strategy>.jsonl
  std::string ckpt_dir;          // default OUT/ckpt-<strategy> when checkpointing
  int ckpt_interval = 0;         // steps; 0 = only at the end and on a signal
  bool save_final = true;        // write a checkpoint when the run ends
  std::string resume;            // checkpoint file or directory (latest in it)
  // Config fields a resume may change from the checkpoint's (resume_check.h)
  std::vector<std::string> resume_overrides;
  std::string init_from;   // Hugging Face GPT-2 folder to start from (lib/checkpoint/hf_gpt2.h)
  int sample_tokens = 96;  // generated after training; 0 = none
  std::string tokenizer;   // decodes the sample (lib/train/sample_tokenizer.h); "" = none
  bool quiet = false;      // no progress lines (tables and errors only)
  // Synchronise the backend at the end of every phase, so the phase table holds
  // device time on an asynchronous device (costs the host/device overlap).
  bool sync_phases = false;
  size_t mem_limit_bytes = 0;  // backend allocation limit (Backend::set_memory_limit); 0 = none

  // distributed (docs/distributed.md): every rank runs the same config
  std::string comm = "auto";       // auto | single | mpi | nccl (make_communicator)
  double comm_timeout = 300.0;     // seconds a collective waits for its peers; <= 0: forever
  int zero = 0;                    // 0: plain data parallel; 1: ZeRO-1 (sharded optimizer state)
  std::string sr_seed = "shared";  // shared | per-rank (diagnostic: replicas drift apart)
  int replica_check = 100;         // steps between replica checksum checks; 0 = never

  // Shadow-FP32 drift probe (lib/train/shadow_probe.h), rank 0 only
  int shadow_fp32 = 0;    // sampled parameters with an unrounded fp32 copy; 0 = off
  int shadow_every = 10;  // steps between {"type":"shadow"} log lines

  GPTConfig model_config() const;  // preset + overrides, validated
  // world: ranks of a data-parallel run. An optimizer step consumes world *
  // grad_accum * batch sequences (the global batch); --tokens counts global tokens.
  uint64_t tokens_per_step(int world = 1) const {
    return uint64_t(world) * uint64_t(batch) * seq_len * grad_accum;
  }
  uint64_t total_steps(int world = 1) const;
  LrSchedule lr_schedule(int world = 1) const;
  void validate() const;  // throws std::invalid_argument naming the flag
  nlohmann::json to_json(int world = 1) const;
  bool per_rank_sr_seed() const { return sr_seed == "per-rank"; }
};

}  // namespace srkit
