// sr-bench train: the throughput / memory matrix (lib/bench/train_matrix.h).
#include <cstdio>
#include <string>

#include "apps/common/flag_checks.h"
#include "apps/sr-bench/subcommand.h"
#include "lib/bench/list_args.h"
#include "lib/bench/text_file.h"
#include "lib/bench/train_matrix.h"
#include "lib/bench/train_report.h"
#include "lib/charts/train_chart.h"
#include "lib/model/gpt_config.h"
#include "lib/precision.h"
#include "lib/util/output_path.h"
#include "lib/util/svg.h"

namespace srkit::bench_app {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

struct TrainArgs {
  std::string models = "tiny";
  std::string strategies;
  std::string batches = "4";
  TrainMatrixOptions options;
  double mem_limit_mb = 0.0;
  bool phases = false;
  std::string csv, json, svg;
};

int run_train(const TrainArgs& a) {
  TrainMatrixOptions o = a.options;
  o.models = parse_model_list(a.models, "--models");
  if (!a.strategies.empty()) o.strategies = parse_strategy_list(a.strategies, "--strategies");
  o.batches = parse_int_list(a.batches, "--batches", 1, 1 << 20);
  if (!(a.mem_limit_mb >= 0.0)) {
    throw std::invalid_argument("--mem-limit-mb must be >= 0 (0: no limit)");
  }
  o.mem_limit_bytes = size_t(a.mem_limit_mb * 1048576.0);
  // On an asynchronous device a phase's host time is only its queueing time.
  o.sync_phases = a.phases;
  o.validate_and_complete();  // every flag checked before the first cell runs

  const TrainMatrixResult r = run_train_matrix(o, stderr);
  std::printf("\n%s\n", train_markdown_table(r).c_str());
  if (a.phases) {
    std::printf(
        "Per-phase time, mean ms per step over all %d steps of each cell (warm-up "
        "included):\n\n%s\n",
        o.warmup + o.steps, train_phases_table(r).c_str());
  }
  for (const std::string& line : train_strategy_summaries(r)) std::printf("%s\n", line.c_str());
  std::printf(
      "\nms/step over %d timed steps after %d warm-up; MFU against the peak of each cell's "
      "compute dtype: %s; memory: backend peak by category, RSS %s\n",
      o.steps, o.warmup, peaks_text(r).c_str(),
      r.rss_per_cell ? "per cell" : "cumulative over the process");
  if (!a.csv.empty()) write_text_file(a.csv, train_csv(r), "--csv");
  if (!a.json.empty()) write_text_file(a.json, train_json(r).dump(2) + "\n", "--json");
  if (!a.svg.empty()) write_text_file(a.svg, svg::render(train_figure(r)), "--svg");
  return 0;
}

}  // namespace

Subcommand add_train_command(CLI::App& parent) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* app = parent.add_subcommand(
      "train",
      "time short training runs over models x micro-batches x precision strategies: ms/step, "
      "tok/s, FLOP/s, MFU, peak memory by category, speedup and memory against mixed");
  TrainMatrixOptions& o = args->options;
  app->add_option("--models", args->models, "model presets: " + join(gpt_preset_names()))
      ->capture_default_str();
  app->add_option("--strategies", args->strategies,
                  "precision strategies (default all: " + join(strategy_preset_names()) + ")");
  app->add_option("--batches", args->batches, "micro-batch sizes, e.g. 1,4,8")
      ->capture_default_str();
  app->add_option("--seq-len", o.seq_len, "tokens per sequence (default: model maximum, <= 256)");
  app->add_option("--steps", o.steps, "timed steps per cell")->capture_default_str();
  app->add_option("--warmup", o.warmup, "untimed steps before them")->capture_default_str();
  app->add_option("--device", o.device, "cpu or cuda")->capture_default_str();
  app->add_option("--threads", o.threads, "CPU threads (0: OpenMP default)");
  app->add_option("--seed", o.seed, "seed of init, data and SR bits")->capture_default_str();
  app->add_option("--peak-gflops", o.peak_gflops,
                  "peak GFLOP/s for MFU, every cell (default: per compute dtype, measured GEMM "
                  "rate on CPU, datasheet rate on GPU)");
  app->add_option("--mem-limit-mb", args->mem_limit_mb,
                  "allocation limit in MiB: cells whose model, optimizer and activations exceed "
                  "it are reported OOM");
  app->add_flag("--phases", args->phases, "also print the forward/backward/optimizer split");
  app->add_option("--csv", args->csv, "write the cells as CSV to this file")
      ->check(srkit::cli::output_file());
  app->add_option("--json", args->json, "write the cells as JSON to this file")
      ->check(srkit::cli::output_file());
  app->add_option("--svg", args->svg,
                  "draw tok/s and peak memory per strategy (bars grouped by model / micro-batch "
                  "cell) as an SVG chart to this file")
      ->check(srkit::cli::output_file());
  return {app, [args] { return run_train(*args); }};
}

}  // namespace srkit::bench_app
