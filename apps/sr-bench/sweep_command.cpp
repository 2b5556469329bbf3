// sr-bench sweep: strategies x peak learning rates x seeds, each cell a real
// training run, reported as loss vs learning rate (lib/bench/sweep_*.h).
// Exit codes: 0 done, 2 bad usage (a flag, a folder another sweep holds, a
// damaged cell result), 1 a cell failed other than by diverging,
// 130 stopped by a signal (rerun the same command to continue).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "apps/common/flag_checks.h"
#include "apps/sr-bench/subcommand.h"
#include "lib/bench/list_args.h"
#include "lib/bench/sweep_report.h"
#include "lib/bench/sweep_run.h"
#include "lib/model/gpt_config.h"
#include "lib/util/atomic_file.h"
#include "lib/util/dir_lock.h"
#include "lib/util/output_path.h"
#include "lib/util/stop_signal.h"

namespace srkit::bench_app {
namespace {

constexpr uint64_t kMaxSteps = 1'000'000'000'000ull;
constexpr uint64_t kMaxTokens = 1'000'000'000'000'000'000ull;

struct SweepArgs {
  std::string strategies = "mixed,bf16,bf16-sr,bf16-kahan";
  std::string lrs = "3e-4,1e-3,3e-3";
  std::string seeds = "1,2,3";
  std::string ablate;
  std::string carry;
  SweepOptions options;
};

void write_report(const std::string& path, const std::string& text) {
  write_file_atomic(path, text.data(), text.size());
}

// A chart that has nothing to draw (every cell diverged) is left out, said once.
void write_chart(const std::string& path, const std::function<std::string()>& render) {
  try {
    write_report(path, render());
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "sr-bench sweep: %s not written: %s\n", path.c_str(), e.what());
  }
}

int run_sweep_command(SweepArgs& a) {
  SweepOptions& o = a.options;
  o.strategies = parse_strategy_list(a.strategies, "--strategies");
  o.lrs = parse_positive_real_list(a.lrs, "--lrs");
  o.seeds = parse_u64_list(a.seeds, "--seeds");
  std::vector<Ablation> ablations;
  if (!a.ablate.empty()) {
    ablations = ablations_of(a.ablate);
    std::vector<std::string> have;
    for (const PrecisionStrategy& s : o.strategies) have.push_back(s.name);
    if (std::find(have.begin(), have.end(), a.ablate) == have.end()) {
      o.strategies.push_back(strategy_from_string(a.ablate));
      have.push_back(a.ablate);
    }
    for (const Ablation& ab : ablations) {
      if (ab.spec.empty() || std::find(have.begin(), have.end(), ab.spec) != have.end()) continue;
      o.strategies.push_back(strategy_from_string(ab.spec));
      have.push_back(ab.spec);
    }
  }
  if (o.base.seq_len == 0) o.base.seq_len = o.base.model_config().max_seq_len;
  if (!a.carry.empty()) o.carry_from = split_list(a.carry, "--carry");
  for (const std::string& dir : o.carry_from) {
    if (!std::filesystem::is_directory(std::filesystem::path(dir) / "cells")) {
      throw std::invalid_argument("--carry " + dir +
                                  ": expected a sweep folder (one holding cells/)");
    }
  }
  o.validate();
  prepare_output_dir("--out", o.out_dir);

  // The sweep owns its folder for its life, as sr-train owns --out: a second
  // sweep (or a rerun while this one lives) is refused at once, exit 2.
  std::shared_ptr<DirLock> lock;
  try {
    lock = DirLock::acquire(o.out_dir, "--out");
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());
  }
  install_stop_handlers();
  const SweepRun run = run_sweep(o, stderr);
  if (run.interrupted) {
    std::fprintf(stderr,
                 "sr-bench sweep: stopped by a signal; finished cells are kept, rerun the same "
                 "command to run the rest\n");
    return 130;
  }
  const SweepTable table = summarize_sweep(o, run.cells);
  const std::vector<SweepCell> cells = sweep_cells(o);
  const std::string md =
      sweep_markdown(o, table, a.ablate, ablations) + carry_markdown(o, cells, run.carry);
  const std::string dir = o.out_dir + "/";
  write_report(dir + "sweep.md", md);
  write_report(dir + "sweep.csv", sweep_csv(run.cells));
  nlohmann::json json = sweep_json(o, table, run.cells);
  json["provenance"] = carry_json(cells, run.carry);
  write_report(dir + "sweep.json", json.dump(1) + "\n");
  write_chart(dir + "sweep-lr.svg", [&] { return sweep_lr_svg(table); });
  write_chart(dir + "sweep-curves.svg", [&] { return sweep_curves_svg(table, run.cells); });
  std::printf(
      "%s\nsr-bench sweep: %d cells run now, %d before, %zu carried from other folders; "
      "reports in %s\n",
      md.c_str(), run.ran, run.carry.done_before, run.carry.carried.size(), o.out_dir.c_str());
  return 0;
}

}  // namespace

Subcommand add_sweep_command(CLI::App& parent) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* app = parent.add_subcommand(
      "sweep",
      "train every strategy x peak learning rate x seed on one model and data set; report the "
      "final validation loss per learning rate, each strategy's best rate and its loss against "
      "mixed precision (sweep.md, .csv, .json, sweep-lr.svg, sweep-curves.svg)");
  TrainConfig& c = args->options.base;
  c.model = "d4";
  c.seq_len = 0;  // the model's maximum unless given
  c.eval_batches = 8;
  app->add_option(
         "--model", c.model,
         "model preset: " +
             [] {
               std::string names;
               for (const std::string& n : gpt_preset_names())
                 names += (names.empty() ? "" : ", ") + n;
               return names;
             }())
      ->capture_default_str();
  app->add_option("--strategies", args->strategies,
                  "precision strategies (presets or specs like bf16-sr:v=f32)")
      ->capture_default_str();
  app->add_option("--lrs", args->lrs, "peak learning rates, e.g. 3e-4,1e-3,3e-3")
      ->capture_default_str();
  app->add_option("--seeds", args->seeds, "seeds (init, data order, SR bits)")
      ->capture_default_str();
  app->add_option("--ablate", args->ablate,
                  "a preset whose components to ablate: adds PRESET:mround=sr,vround=sr, "
                  "PRESET:v=f32, PRESET:g=f32, bf16-kahan and mixed:m=bf16,v=bf16 (and PRESET "
                  "itself)");
  app->add_option("--out", args->options.out_dir, "folder of the cells and reports")->required();
  app->add_option("--carry", args->carry,
                  "comma-separated folders of this grid's cells finished elsewhere (their "
                  "cells/.../result.json files, e.g. committed under docs/experiments/): a cell "
                  "they hold with this grid's configuration and numerics probe is taken instead "
                  "of run; the report says which and why not")
      ->type_name("DIRS");
  app->add_option("--jobs", args->options.jobs, "cells run at once, one process each")
      ->check(cli::integer_in(1, 256))
      ->capture_default_str();
  app->add_option("--threads", args->options.threads,
                  "CPU threads of the whole sweep, split over --jobs (0: all cores)")
      ->check(cli::integer_in(0, 4096));
  app->add_option("--device", c.device, "cpu or cuda")->capture_default_str();
  app->add_option("--data", c.data, "training text or token file (default: synthetic corpus)");
  app->add_option("--val-data", c.val_data, "validation data (default: tail of --data)");
  app->add_option("--batch", c.batch, "sequences per micro-batch")
      ->check(cli::integer_in(1, 1 << 20))
      ->capture_default_str();
  app->add_option("--seq-len", c.seq_len, "tokens per sequence (default: the model's maximum)")
      ->check(cli::integer_in(1, 1 << 20));
  app->add_option("--grad-accum", c.grad_accum, "micro-batches per optimizer step")
      ->check(cli::integer_in(1, 1 << 20))
      ->capture_default_str();
  app->add_option("--steps", c.steps, "optimizer steps per cell")
      ->check(cli::unsigned_in(1, kMaxSteps))
      ->capture_default_str();
  app->add_option("--tokens", c.tokens, "train each cell for this many tokens instead of --steps")
      ->check(cli::unsigned_in(0, kMaxTokens));
  app->add_option("--warmup", c.warmup, "linear warmup steps")
      ->check(cli::unsigned_in(0, kMaxSteps))
      ->capture_default_str();
  app->add_option("--schedule", c.schedule, "decay after warmup: cosine, linear or constant")
      ->capture_default_str();
  app->add_option("--min-lr", c.min_lr, "learning rate at the last step (default: each lr / 10)")
      ->check(cli::real_in(-1, 10));
  app->add_option("--weight-decay", c.adamw.weight_decay, "decoupled weight decay")
      ->check(cli::real_in(0, 10))
      ->capture_default_str();
  app->add_option("--clip", c.adamw.grad_clip, "global gradient-norm clip (<= 0: off)")
      ->check(cli::real_in(-1e30, 1e30))
      ->capture_default_str();
  app->add_option("--eval-batches", c.eval_batches, "validation batches per evaluation")
      ->check(cli::integer_in(1, 1 << 20))
      ->capture_default_str();
  app->add_option("--curve-points", args->options.curve_points,
                  "evaluations per cell (the loss curves)")
      ->check(cli::integer_in(1, 1 << 20))
      ->capture_default_str();
  return {app, [args] { return run_sweep_command(*args); }};
}

}  // namespace srkit::bench_app
