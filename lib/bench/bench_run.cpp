#include "lib/bench/bench_run.h"

#include <algorithm>

#include "lib/util/temp_dir.h"

namespace srkit {

TrainConfig bench_train_config(const GPTConfig& model, const PrecisionStrategy& strategy, int batch,
                               int seq_len, uint64_t steps, const BenchRunSettings& settings,
                               const std::string& out_dir) {
  const std::vector<std::string>& presets = gpt_preset_names();
  const bool is_preset = std::find(presets.begin(), presets.end(), model.name) != presets.end();
  TrainConfig c;
  c.model = is_preset ? model.name : presets.front();
  c.layers = model.num_layers;
  c.channels = model.channels;
  c.heads = model.num_heads;
  c.vocab = model.vocab_size;
  c.max_seq_len = model.max_seq_len;
  c.device = settings.device;
  c.threads = settings.threads;
  c.seed = settings.seed;
  c.mem_limit_bytes = settings.mem_limit_bytes;
  c.sync_phases = settings.sync_phases;
  c.strategy = strategy;
  c.batch = batch;
  c.grad_accum = settings.grad_accum;
  c.recompute = settings.recompute ? "layer" : "none";
  c.seq_len = seq_len;
  c.steps = steps;
  c.synthetic_bytes = size_t(1) << 18;  // > any sequence length; cheap to generate
  c.eval_interval = 0;
  c.final_eval = false;
  c.save_final = false;
  c.sample_tokens = 0;
  c.quiet = true;
  c.out_dir = out_dir;
  return c;
}

RunSummary run_bench_training(const GPTConfig& model, const PrecisionStrategy& strategy, int batch,
                              int seq_len, uint64_t steps, const BenchRunSettings& settings) {
  TempDir out("srkit-bench");
  Trainer trainer(bench_train_config(model, strategy, batch, seq_len, steps, settings, out.path()));
  return trainer.run();
}

}  // namespace srkit
