#include "lib/train/train_config.h"

#include <cmath>
#include <stdexcept>

#include "lib/checkpoint/hf_gpt2.h"
#include "lib/checkpoint/hf_gpt2_config.h"
#include "lib/precision.h"
#include "lib/train/resume_check.h"

namespace srkit {

namespace {

// --init-from: the shape of the folder's config.json; a preset or override
// given as well must describe the same model.
GPTConfig init_from_shape(const TrainConfig& t) {
  GPTConfig c;
  try {
    c = read_hf_gpt2_config(t.init_from);
    // The weights' shapes from the file's header, before anything is sized from the config.
    check_hf_gpt2_weights(t.init_from, c);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string("--init-from: ") + e.what());
  }
  const std::string file = hf_config_path(t.init_from);
  if (!t.model.empty()) {
    const GPTConfig preset = gpt_preset(t.model);
    if (!preset.same_shape(c)) {
      throw std::invalid_argument("--model " + preset.describe() + " conflicts with " + file +
                                  ": " + c.describe());
    }
    c.name = t.model;
  }
  auto agree = [&](const char* flag, int given, const char* key, int have) {
    if (given > 0 && given != have) {
      throw std::invalid_argument(std::string(flag) + " " + std::to_string(given) +
                                  " conflicts with " + file + ": " + key + " " +
                                  std::to_string(have));
    }
  };
  agree("--layers", t.layers, "n_layer", c.num_layers);
  agree("--channels", t.channels, "n_embd", c.channels);
  agree("--heads", t.heads, "n_head", c.num_heads);
  agree("--vocab", t.vocab, "vocab_size", c.vocab_size);
  agree("--max-seq-len", t.max_seq_len, "n_positions", c.max_seq_len);
  return c;
}

}  // namespace

GPTConfig TrainConfig::model_config() const {
  if (!init_from.empty()) return init_from_shape(*this);
  GPTConfig c = gpt_preset(model);
  if (layers > 0) c.num_layers = layers;
  if (channels > 0) c.channels = channels;
  if (heads > 0) c.num_heads = heads;
  if (vocab > 0) c.vocab_size = vocab;
  if (max_seq_len > 0) c.max_seq_len = max_seq_len;
  if (layers || channels || heads || vocab || max_seq_len) c.name = model + "*";
  c.validate();
  return c;
}

uint64_t TrainConfig::total_steps(int world) const {
  // Rounded up without forming tokens + per_step - 1, which wraps near 2^64.
  if (tokens > 0) {
    const uint64_t per_step = tokens_per_step(world);
    return tokens / per_step + (tokens % per_step != 0 ? 1 : 0);
  }
  return steps;
}

LrSchedule TrainConfig::lr_schedule(int world) const {
  LrSchedule s;
  s.lr = lr;
  s.min_lr = min_lr < 0.0f ? lr / 10.0f : min_lr;
  s.warmup_steps = warmup;
  s.total_steps = total_steps(world);
  s.decay = decay_from_string(schedule);
  return s;
}

void TrainConfig::validate() const {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw std::invalid_argument(message);
  };
  // Overrides: 0 keeps the preset's value (the CLI itself accepts only >= 1).
  require(layers >= 0 && channels >= 0 && heads >= 0 && vocab >= 0 && max_seq_len >= 0,
          "model overrides (--layers, --channels, --heads, --vocab, --max-seq-len) must be >= 1");
  const GPTConfig mc = model_config();
  (void)decay_from_string(schedule);
  require(val_data.empty() || !data.empty(),
          "--val-data needs --data (the built-in corpus holds out its own tail)");
  require(!out_dir.empty(), "--out '': expected a folder name");
  require(recompute == "none" || recompute == "layer",
          "--recompute must be none or layer (got '" + recompute + "')");
  require(batch >= 1, "--batch must be >= 1 (got " + std::to_string(batch) + ")");
  require(seq_len >= 1, "--seq-len must be >= 1 (got " + std::to_string(seq_len) + ")");
  require(seq_len <= mc.max_seq_len, "--seq-len " + std::to_string(seq_len) +
                                         " exceeds the model's maximum sequence length " +
                                         std::to_string(mc.max_seq_len));
  require(grad_accum >= 1, "--grad-accum must be >= 1");
  require(total_steps() >= 1, "--steps (or --tokens) must give at least one step");
  require(std::isfinite(lr) && lr > 0.0f, "--lr must be a positive number");
  require(std::isfinite(min_lr) && min_lr <= lr, "--min-lr must be <= --lr (negative: lr/10)");
  require(adamw.beta1 >= 0.0f && adamw.beta1 < 1.0f, "--beta1 must be in [0, 1)");
  require(adamw.beta2 >= 0.0f && adamw.beta2 < 1.0f, "--beta2 must be in [0, 1)");
  require(std::isfinite(adamw.eps) && adamw.eps > 0.0f, "--eps must be a finite number > 0");
  require(std::isfinite(adamw.weight_decay) && adamw.weight_decay >= 0.0f,
          "--weight-decay must be a finite number >= 0");
  require(std::isfinite(adamw.grad_clip), "--clip must be finite (<= 0 disables clipping)");
  require(val_fraction >= 0.0 && val_fraction < 1.0, "--val-fraction must be in [0, 1)");
  require(eval_interval >= 0, "--eval-interval must be >= 0");
  require(log_interval >= 1, "--log-interval must be >= 1");
  require(eval_batches >= 1, "--eval-batches must be >= 1");
  require(ckpt_interval >= 0, "--ckpt-interval must be >= 0");
  require(threads >= 0, "--threads must be >= 0");
  require(sample_tokens >= 0, "--sample-tokens must be >= 0");
  require(synthetic_bytes >= 4096, "--synthetic-bytes must be >= 4096");
  require(comm == "auto" || comm == "single" || comm == "mpi" || comm == "nccl",
          "--comm must be auto, single, mpi or nccl (got '" + comm + "')");
  require(comm != "nccl" || device == "cuda",
          "--comm nccl moves GPU buffers: it needs --device cuda (use --comm mpi for CPU ranks)");
  require(std::isfinite(comm_timeout),
          "--comm-timeout must be a number of seconds (<= 0: wait forever)");
  require(zero == 0 || zero == 1, "--zero must be 0 or 1 (got " + std::to_string(zero) + ")");
  require(sr_seed == "shared" || sr_seed == "per-rank",
          "--sr-seed must be shared or per-rank (got '" + sr_seed + "')");
  require(replica_check >= 0, "--replica-check must be >= 0 (0: never)");
  require(shadow_fp32 >= 0, "--shadow-fp32 must be >= 0 (0: off)");
  require(shadow_every >= 1, "--shadow-every must be >= 1");
  check_resume_override_names(resume_overrides);
  require(resume_overrides.empty() || !resume.empty(), "--resume-override needs --resume");
}

nlohmann::json TrainConfig::to_json(int world) const {
  const GPTConfig mc = model_config();
  return {
      {"model", model},
      {"layers", mc.num_layers},
      {"channels", mc.channels},
      {"heads", mc.num_heads},
      {"vocab", mc.vocab_size},
      {"max_seq_len", mc.max_seq_len},
      {"strategy", strategy.name},
      {"device", device},
      {"data", data.empty() ? "synthetic" : data},
      {"val_data", val_data},
      {"val_fraction", val_fraction},
      {"synthetic_bytes", synthetic_bytes},
      {"batch", batch},
      {"seq_len", seq_len},
      {"grad_accum", grad_accum},
      {"steps", total_steps(world)},
      {"lr", lr},
      {"min_lr", lr_schedule(world).min_lr},
      {"warmup", warmup},
      {"schedule", schedule},
      {"beta1", adamw.beta1},
      {"beta2", adamw.beta2},
      {"eps", adamw.eps},
      {"weight_decay", adamw.weight_decay},
      {"clip", adamw.grad_clip},
      {"seed", seed},
      {"world_size", world},
      {"zero", zero},
      {"sr_seed", sr_seed},
      {"init_from", init_from},
  };
}

}  // namespace srkit
