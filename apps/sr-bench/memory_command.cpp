// sr-bench memory: the analytic per-rank memory model (lib/train/memory_model.h)
// as a table, optionally checked against a real training step (--measure).
#include <cstdio>
#include <string>

#include "apps/common/flag_checks.h"
#include "apps/sr-bench/subcommand.h"
#include "lib/bench/bench_run.h"
#include "lib/bench/list_args.h"
#include "lib/bench/memory_budget.h"
#include "lib/bench/memory_table.h"
#include "lib/bench/text_file.h"
#include "lib/model/gpt_config.h"
#include "lib/precision.h"
#include "lib/train/train_config.h"

namespace srkit::bench_app {
namespace {

struct MemoryArgs {
  std::string models = "neo-6.7b";
  TrainConfig shape;  // preset overrides (layers, channels, ...), threads, seed for --measure
  std::string strategies, worlds = "1", zeros = "0", batches = "1";
  int seq_len = 0;
  std::string recompute;  // empty: off, or both with --memory-budget
  std::string device = "cpu";
  std::string unit = "auto";
  bool measure = false;
  std::string memory_budget;  // empty: the table of every batch instead
  int max_batch = 1 << 16;
  std::string csv, json;
};

constexpr const char* kNotes =
    "Per rank. weights, grads: the flat buffers (alignment padding included); master, moments,\n"
    "kahan: the optimizer's arrays for its ZeRO shard; activations: the buffers the model\n"
    "allocates (GPT::activation_buffers, with what the device's attention keeps); scratch: the\n"
    "CPU bf16 GEMM's per-thread fp32 tile panels (0 for fp32 weights; on cuda: cuBLASLt's\n"
    "workspace and the ops' partial sums), the step record, and amp's bf16 copies of weights\n"
    "and gradients; comm: the MPI communicator's receive buffer (0 on cuda: NCCL works in\n"
    "place).\n"
    "recompute on: each layer's input kept and one layer's activations live (sr-train --recompute\n"
    "layer). ZeRO 2 (gradient shard + one bucket) is a model only: the engine implements ZeRO "
    "0/1.\n";

// Each preset with the overrides applied (TrainConfig::model_config validates).
std::vector<GPTConfig> model_configs(const MemoryArgs& a) {
  std::vector<GPTConfig> out;
  for (const std::string& name : parse_model_list(a.models, "--models")) {
    TrainConfig c = a.shape;
    c.model = name;
    out.push_back(c.model_config());
  }
  return out;
}

std::vector<bool> recompute_modes(const std::string& mode) {
  if (mode == "off") return {false};
  if (mode == "on") return {true};
  if (mode == "both") return {false, true};
  throw std::invalid_argument("--recompute: expected off, on or both (got '" + mode + "')");
}

// One training step per row the engine can run here (one rank, ZeRO 0 or 1),
// recording the backend's high-water mark.
void measure_rows(std::vector<MemoryRow>& rows, const MemoryArgs& a) {
  for (MemoryRow& row : rows) {
    const MemoryScenario& s = row.scenario;
    if (s.world != 1 || s.zero > 1) continue;
    BenchRunSettings settings{s.device, a.shape.threads, a.shape.seed};
    settings.recompute = s.recompute;
    std::fprintf(stderr, "measuring %s %s B=%d T=%d recompute %s (one step)\n",
                 s.model.name.c_str(), s.strategy.name.c_str(), s.batch, s.seq_len,
                 s.recompute ? "on" : "off");
    row.measured_total =
        run_bench_training(s.model, s.strategy, s.batch, s.seq_len, 1, settings).memory.total_peak;
  }
}

std::string checked_unit(const std::string& unit) {
  if (unit != "auto" && unit != "MiB" && unit != "GiB") {
    throw std::invalid_argument("--unit: expected auto, MiB or GiB (got '" + unit + "')");
  }
  return unit;
}

// --memory-budget: the largest micro-batch of every scenario, nothing run.
int run_budget(const MemoryArgs& a) {
  if (a.measure) throw std::invalid_argument("--measure: not with --memory-budget (nothing runs)");
  if (a.max_batch < 1) throw std::invalid_argument("--max-batch must be >= 1");
  if (!a.csv.empty()) throw std::invalid_argument("--csv: not with --memory-budget (use --json)");
  BudgetMatrixOptions o;
  o.models = model_configs(a);
  if (!a.strategies.empty()) o.strategies = parse_strategy_list(a.strategies, "--strategies");
  o.worlds = parse_int_list(a.worlds, "--world", 1, 1 << 20);
  o.zeros = parse_int_list(a.zeros, "--zero", 0, 2);
  o.seq_len = a.seq_len;
  o.recompute = recompute_modes(a.recompute.empty() ? "both" : a.recompute);
  o.device = a.device;
  o.threads = a.shape.threads;
  o.max_batch = a.max_batch;
  std::string unit = checked_unit(a.unit);
  const MemoryBudget budget = resolve_memory_budget(a.memory_budget, a.device, a.shape.threads);
  o.budget = budget.bytes;
  const std::vector<BudgetAnswer> rows = budget_answers(o);
  if (unit == "auto") unit = memory_unit_for(budget.bytes);
  std::printf("%s\n%s", budget_markdown_table(rows, budget, unit).c_str(), kNotes);
  if (!a.json.empty()) write_text_file(a.json, budget_json(rows, budget).dump(2) + "\n", "--json");
  return 0;
}

int run_memory(const MemoryArgs& a) {
  if (!a.memory_budget.empty()) return run_budget(a);
  MemoryMatrixOptions o;
  o.models = model_configs(a);
  if (!a.strategies.empty()) o.strategies = parse_strategy_list(a.strategies, "--strategies");
  o.worlds = parse_int_list(a.worlds, "--world", 1, 1 << 20);
  o.zeros = parse_int_list(a.zeros, "--zero", 0, 2);
  o.batches = parse_int_list(a.batches, "--batches", 1, 1 << 20);
  o.seq_len = a.seq_len;
  o.recompute = recompute_modes(a.recompute.empty() ? "off" : a.recompute);
  o.device = a.device;
  o.threads = a.shape.threads;
  const std::string unit_flag = checked_unit(a.unit);
  std::vector<MemoryRow> rows = memory_rows(o);
  if (a.measure) measure_rows(rows, a);
  const std::string unit = unit_flag == "auto" ? memory_auto_unit(rows) : unit_flag;
  std::printf("%s\n%s", memory_markdown_table(rows, unit).c_str(), kNotes);
  if (!a.csv.empty()) write_text_file(a.csv, memory_csv(rows), "--csv");
  if (!a.json.empty()) write_text_file(a.json, memory_json(rows).dump(2) + "\n", "--json");
  return 0;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

Subcommand add_memory_command(CLI::App& parent) {
  auto args = std::make_shared<MemoryArgs>();
  CLI::App* app = parent.add_subcommand(
      "memory",
      "analytic training memory per rank: weights, master, grads, moments, Kahan, activations, "
      "scratch, communication buffers, and the saving of each strategy against mixed");
  MemoryArgs& a = *args;
  app->add_option("--models", a.models, "model presets: " + join(gpt_preset_names()))
      ->capture_default_str();
  app->add_option("--layers", a.shape.layers, "override: number of layers");
  app->add_option("--channels", a.shape.channels, "override: embedding width");
  app->add_option("--heads", a.shape.heads, "override: attention heads");
  app->add_option("--vocab", a.shape.vocab, "override: vocabulary size");
  app->add_option("--max-seq-len", a.shape.max_seq_len, "override: maximum sequence length");
  app->add_option("--strategies", a.strategies,
                  "precision strategies (default all: " + join(strategy_preset_names()) + ")");
  app->add_option("--world", a.worlds, "data-parallel world sizes, e.g. 1,8")
      ->capture_default_str();
  app->add_option("--zero", a.zeros, "ZeRO stages: 0, 1, 2 (list)")->capture_default_str();
  CLI::Option* batches =
      app->add_option("--batches", a.batches, "micro-batch sizes per rank")->capture_default_str();
  app->add_option("--seq-len", a.seq_len, "tokens per sequence (default: model maximum)");
  app->add_option("--recompute", a.recompute,
                  "activation recomputation: off, on or both (default off; both with "
                  "--memory-budget)");
  app->add_option("--memory-budget", a.memory_budget,
                  "instead of a table per batch: the largest micro-batch of each strategy, world, "
                  "ZeRO stage and recompute setting within this memory per rank (80GiB, 141GB, "
                  "... or 'device': what the --device backend can allocate now)")
      ->excludes(batches);
  app->add_option("--max-batch", a.max_batch, "with --memory-budget: the largest batch to consider")
      ->capture_default_str();
  app->add_option("--device", a.device,
                  "whose scratch and communication buffers: cpu (MPI) or cuda (NCCL)")
      ->capture_default_str();
  app->add_option("--unit", a.unit, "auto, MiB or GiB")->capture_default_str();
  app->add_flag("--measure", a.measure,
                "also run one training step of each one-rank row here and show the measured "
                "backend peak and the model's error");
  app->add_option("--threads", a.shape.threads,
                  "CPU threads: the GEMM scratch is per thread; --measure runs with them (0: "
                  "OpenMP default)");
  app->add_option("--csv", a.csv, "write the rows as CSV to this file")
      ->check(srkit::cli::output_file());
  app->add_option("--json", a.json, "write the rows as JSON to this file")
      ->check(srkit::cli::output_file());
  return {app, [args] { return run_memory(*args); }};
}

}  // namespace srkit::bench_app
