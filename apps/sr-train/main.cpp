// sr-train: train a GPT-style model with a chosen precision strategy, or
// compare several strategies on the same model, data and seed.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "apps/common/cpu_environment.h"
#include "apps/common/flag_checks.h"
#include "apps/sr-train/compare.h"
#include "apps/sr-train/failure.h"
#include "lib/comm/communicator.h"
#include "lib/model/gpt_config.h"
#include "lib/precision.h"
#include "lib/train/resume_check.h"
#include "lib/train/trainer.h"
#include "lib/util/build_info.h"

namespace {

namespace cli = srkit::cli;

// Upper bounds of the run-length flags: far beyond any real run, and small
// enough that steps x tokens per step cannot overflow 64 bits.
constexpr uint64_t kMaxSteps = 1'000'000'000'000ull;
constexpr uint64_t kMaxTokens = 1'000'000'000'000'000'000ull;

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

void add_flags(CLI::App& app, srkit::TrainConfig& c, std::string& compare, std::string& json) {
  app.add_option("--model", c.model, "model preset: " + join(srkit::gpt_preset_names()))
      ->capture_default_str();
  app.add_option("--layers", c.layers, "override: number of layers")
      ->check(cli::integer_in(1, 4096));
  app.add_option("--channels", c.channels, "override: embedding width")
      ->check(cli::integer_in(1, 1 << 16));
  app.add_option("--heads", c.heads, "override: attention heads")->check(cli::integer_in(1, 4096));
  app.add_option("--vocab", c.vocab, "override: vocabulary size")
      ->check(cli::integer_in(1, 1 << 24));
  app.add_option("--max-seq-len", c.max_seq_len, "override: maximum sequence length")
      ->check(cli::integer_in(1, 1 << 20));
  // Parsed here, once: the run receives the PrecisionStrategy.
  app.add_option_function<std::string>(
         "--strategy",
         [&c](const std::string& spec) {
           try {
             c.strategy = srkit::strategy_from_string(spec);
           } catch (const std::invalid_argument& e) {
             throw CLI::ValidationError("--strategy", e.what());
           }
         },
         "precision strategy: " + join(srkit::strategy_preset_names()) +
             ", optionally with overrides, e.g. bf16-sr:v=f32,vround=sr (default " +
             c.strategy.name + ")")
      ->type_name("SPEC");
  app.add_option("--compare", compare,
                 "comma-separated strategies to train one after another on the same model, "
                 "data and seed; prints a table");
  app.add_option("--device", c.device, "cpu or cuda")->capture_default_str();
  app.add_option("--threads", c.threads, "CPU threads (0 = OpenMP default)")
      ->check(cli::integer_in(0, 4096));
  app.add_option("--data", c.data,
                 "training data: a text file, or llm.c .bin shard(s) (glob allowed); "
                 "default: the built-in synthetic corpus");
  app.add_option("--val-data", c.val_data, "validation data (default: tail of --data)");
  app.add_option("--val-fraction", c.val_fraction, "held-out fraction of --data")
      ->capture_default_str()
      ->check(cli::real_in(0, 1, false, true));
  app.add_option("--synthetic-bytes", c.synthetic_bytes, "size of the built-in corpus")
      ->capture_default_str()
      ->check(cli::unsigned_in(4096, uint64_t(1) << 36));
  app.add_option("--batch", c.batch, "sequences per micro-batch")
      ->capture_default_str()
      ->check(cli::integer_in(1, 1 << 20));
  app.add_option("--seq-len", c.seq_len, "tokens per sequence (default: the model's maximum)")
      ->check(cli::integer_in(1, 1 << 20));
  app.add_option("--recompute", c.recompute,
                 "activation recomputation: none, or layer (keep each layer's input, recompute "
                 "its activations in backward; the same bits, less memory, about one more "
                 "forward per step)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "layer"}));
  app.add_option("--grad-accum", c.grad_accum, "micro-batches per optimizer step")
      ->capture_default_str()
      ->check(cli::integer_in(1, 1 << 20));
  app.add_option("--steps", c.steps, "optimizer steps")
      ->capture_default_str()
      ->check(cli::unsigned_in(1, kMaxSteps));
  app.add_option("--tokens", c.tokens, "train for this many tokens instead of --steps")
      ->check(cli::unsigned_in(0, kMaxTokens));
  app.add_option("--lr", c.lr, "peak learning rate")
      ->capture_default_str()
      ->check(cli::real_in(0, 10, true));
  app.add_option("--min-lr", c.min_lr, "learning rate at the last step (default lr/10)")
      ->check(cli::real_in(-1, 10));
  app.add_option("--warmup", c.warmup, "linear warmup steps")
      ->capture_default_str()
      ->check(cli::unsigned_in(0, kMaxSteps));
  app.add_option("--schedule", c.schedule, "decay after warmup: cosine, linear or constant")
      ->capture_default_str();
  app.add_option("--weight-decay", c.adamw.weight_decay, "decoupled weight decay")
      ->capture_default_str()
      ->check(cli::real_in(0, 10));
  app.add_option("--beta1", c.adamw.beta1, "AdamW beta1")
      ->capture_default_str()
      ->check(cli::real_in(0, 1, false, true));
  app.add_option("--beta2", c.adamw.beta2, "AdamW beta2")
      ->capture_default_str()
      ->check(cli::real_in(0, 1, false, true));
  app.add_option("--eps", c.adamw.eps, "AdamW epsilon")
      ->capture_default_str()
      ->check(cli::real_in(0, 1, true));
  app.add_option("--clip", c.adamw.grad_clip, "global gradient-norm clip (<= 0: off)")
      ->capture_default_str()
      ->check(cli::real_in(-1e30, 1e30));
  app.add_option("--seed", c.seed, "seed of init, data order and SR bits")
      ->capture_default_str()
      ->check(cli::unsigned_in(0, UINT64_MAX));
  app.add_option("--eval-interval", c.eval_interval, "steps between evaluations (0: end only)")
      ->capture_default_str()
      ->check(cli::integer_in(0, INT32_MAX));
  app.add_option("--eval-batches", c.eval_batches, "validation batches per evaluation")
      ->capture_default_str()
      ->check(cli::integer_in(1, 1 << 20));
  app.add_option("--log-interval", c.log_interval,
                 "steps between JSONL step records (the optimizer's rounding telemetry is "
                 "computed only on those steps)")
      ->capture_default_str()
      ->check(cli::integer_in(1, INT32_MAX));
  app.add_option("--out", c.out_dir, "directory for logs, checkpoints and tables")
      ->capture_default_str();
  app.add_option("--log", c.log_file, "JSONL metrics log (default OUT/<strategy>.jsonl)");
  app.add_option("--ckpt-dir", c.ckpt_dir, "checkpoint directory (default OUT/ckpt-<strategy>)");
  app.add_option("--ckpt-interval", c.ckpt_interval, "steps between checkpoints (0: end only)")
      ->capture_default_str()
      ->check(cli::integer_in(0, INT32_MAX));
  app.add_flag("!--no-final-ckpt", c.save_final, "do not write a checkpoint at the end");
  app.add_option("--resume", c.resume, "continue from a checkpoint file or directory");
  app.add_option("--resume-override", c.resume_overrides,
                 "config fields this resume may change from the checkpoint's: " +
                     join(srkit::resume_override_names()) + " (e.g. steps,lr)")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("NAMES");
  app.add_option("--init-from", c.init_from,
                 "start from a Hugging Face GPT-2 folder (config.json + model.safetensors, e.g. "
                 "the public GPT-2 124M weights); its config.json sets the model shape; optimizer "
                 "state starts fresh")
      ->type_name("DIR");
  app.add_option("--sample-tokens", c.sample_tokens, "tokens to generate at the end (0: none)")
      ->capture_default_str()
      ->check(cli::integer_in(0, 1 << 20));
  app.add_option("--tokenizer", c.tokenizer,
                 "tokenizer.json (or vocab.json with merges.txt beside it) that turns the "
                 "generated sample into text");
  app.add_flag("-q,--quiet", c.quiet, "no progress lines");
  app.add_option("--comm", c.comm,
                 "communicator: auto (MPI when launched by mpirun/srun with more than one rank), "
                 "single, mpi or nccl")
      ->capture_default_str();
  app.add_option("--comm-timeout", c.comm_timeout,
                 "seconds a collective waits for the other ranks before the job is aborted, "
                 "naming the missing rank (0: wait forever)")
      ->capture_default_str()
      ->check(cli::real_in(-1, 1e7));
  app.add_option("--zero", c.zero,
                 "0: plain data parallel; 1: ZeRO-1 (each rank keeps and updates one shard of "
                 "the optimizer state)")
      ->capture_default_str()
      ->check(cli::integer_in(0, 1));
  app.add_option("--sr-seed", c.sr_seed,
                 "shared: every rank draws the same SR bits (replicas stay identical); "
                 "per-rank: each rank seeds its own (diagnostic: shows the drift)")
      ->capture_default_str();
  app.add_option("--replica-check", c.replica_check,
                 "steps between checks that all ranks hold identical weights (0: never)")
      ->capture_default_str()
      ->check(cli::integer_in(0, INT32_MAX));
  app.add_option("--shadow-fp32", c.shadow_fp32,
                 "keep an unrounded fp32 copy of K sampled parameters and log the drift of the "
                 "real weights from it (0: off)")
      ->type_name("K")
      ->capture_default_str()
      ->check(cli::integer_in(0, 1 << 26));
  app.add_option("--shadow-every", c.shadow_every, "steps between shadow drift log lines")
      ->type_name("N")
      ->capture_default_str()
      ->check(cli::integer_in(1, INT32_MAX));
  app.add_option("--json", json, "write the summary (or comparison) as JSON to this file")
      ->check(srkit::cli::output_file());
}

}  // namespace

int main(int argc, char** argv) {
  if (const auto error = srkit::cli::cpu_environment_error()) {  // before --version reports them
    std::fprintf(stderr, "sr-train: %s\n", error->c_str());
    return 2;
  }
  CLI::App app{"sr-train: train GPT-style models in pure BF16 with stochastic rounding"};
  // --version: the build facts every run's log and checkpoints record too.
  app.set_version_flag("--version", [] {
    return std::string("sr-train ") + SRKIT_VERSION + "\n" + srkit::build_facts_text();
  });
  // A later flag overrides an earlier one, so scripts can append to a base command.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  srkit::TrainConfig config;
  config.seq_len = 0;  // unless given: the model's maximum (resolved after parsing)
  std::string compare, json;
  add_flags(app, config, compare, json);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "sr-train: %s (see --help)\n", e.what());
    return 2;
  }
  srkit::install_stop_handlers();
  // One communicator for the whole process (MPI starts once), shared by every
  // Trainer of --compare. Flags are checked first, so a typo never starts MPI.
  std::unique_ptr<srkit::Communicator> comm;
  // With --init-from the folder gives the shape; --model then only double-checks it.
  if (!config.init_from.empty() && app.count("--model") == 0) config.model.clear();
  try {
    if (config.seq_len == 0) config.seq_len = config.model_config().max_seq_len;
    config.validate();
    comm = srkit::make_communicator(config.comm, config.comm_timeout);
    if (!compare.empty()) return srkit::run_compare(config, *comm, compare, json);
    return srkit::run_single(config, *comm, json);
  } catch (const srkit::Interrupted& e) {  // before the training loop: nothing to save
    return srkit::fail(comm.get(), e.what(), 128 + e.signal);
  } catch (const srkit::TrainingDiverged& e) {
    return srkit::fail(comm.get(), e.what(), 3);
  } catch (const std::bad_alloc&) {  // outside a Trainer (which names its phase)
    return srkit::fail(comm.get(), "out of memory", 2);
  } catch (const std::exception& e) {
    return srkit::fail(comm.get(), e.what(), 2);
  }
}
