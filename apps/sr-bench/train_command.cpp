// sr-bench train: the throughput / memory matrix (lib/bench/train_matrix.h).
#include <cstdio>
#include <string>

#include "apps/common/flag_checks.h"
#include "apps/sr-bench/subcommand.h"
#include "lib/bench/budget_search.h"
#include "lib/bench/list_args.h"
#include "lib/bench/text_file.h"
#include "lib/bench/train_matrix.h"
#include "lib/bench/train_report.h"
#include "lib/charts/budget_chart.h"
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
  std::string memory_budget;  // empty: the matrix of --batches
  uint64_t tokens_per_step = 0;
  std::string candidates = "frontier";
  std::string csv, json, svg;
};

// --memory-budget: each strategy's fastest configuration within the budget.
int run_budget(const TrainArgs& a) {
  BudgetSearchOptions o;
  o.run = a.options;
  o.run.models = parse_model_list(a.models, "--models");
  if (!a.strategies.empty()) o.run.strategies = parse_strategy_list(a.strategies, "--strategies");
  o.run.sync_phases = a.phases;
  if (a.candidates != "frontier" && a.candidates != "all") {
    throw std::invalid_argument("--candidates: expected frontier or all (got '" + a.candidates +
                                "')");
  }
  o.all_candidates = a.candidates == "all";
  if (a.tokens_per_step == 0) {
    throw std::invalid_argument(
        "--tokens-per-step: required with --memory-budget (the optimizer step every strategy "
        "takes, a multiple of --seq-len)");
  }
  if (!a.csv.empty()) throw std::invalid_argument("--csv: not with --memory-budget (use --json)");
  o.tokens_per_step = a.tokens_per_step;
  o.budget = resolve_memory_budget(a.memory_budget, o.run.device, o.run.threads);
  const BudgetSearchResult r = run_budget_search(o, stderr);
  std::printf("\n%s", budget_search_markdown(r).c_str());
  std::printf(
      "\nms/step over %d timed steps after %d warm-up, each of %llu tokens; the budget is the "
      "backend's allocation limit in every run and the measured peak (backend total) must be "
      "within it; candidates from the memory model (sr-bench memory --memory-budget)\n",
      o.run.steps, o.run.warmup, static_cast<unsigned long long>(o.tokens_per_step));
  if (!a.json.empty()) write_text_file(a.json, budget_search_json(r).dump(2) + "\n", "--json");
  if (!a.svg.empty()) write_text_file(a.svg, svg::render(budget_figure(r)), "--svg");
  return 0;
}

int run_train(const TrainArgs& a) {
  if (!a.memory_budget.empty()) return run_budget(a);
  if (a.tokens_per_step != 0) {
    throw std::invalid_argument("--tokens-per-step: only with --memory-budget");
  }
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
  CLI::Option* batches =
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
  CLI::Option* mem_limit =
      app->add_option("--mem-limit-mb", args->mem_limit_mb,
                      "allocation limit in MiB: cells whose model, optimizer and activations "
                      "exceed it are reported OOM");
  app->add_option("--memory-budget", args->memory_budget,
                  "instead of the --batches matrix: each strategy's fastest micro-batch x "
                  "accumulation x recomputation within this memory (80GiB, 512MiB, ... or "
                  "'device': what the backend can allocate now), chosen from the memory model "
                  "and confirmed by running it")
      ->excludes(batches)
      ->excludes(mem_limit);
  app->add_option("--tokens-per-step", args->tokens_per_step,
                  "with --memory-budget: tokens per optimizer step, the same for every strategy "
                  "(a multiple of --seq-len; accumulation makes it up)");
  app->add_option("--candidates", args->candidates,
                  "with --memory-budget: frontier (the largest batch that fits, with and without "
                  "recomputation) or all (every candidate that fits)")
      ->capture_default_str();
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
