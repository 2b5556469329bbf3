#include "apps/sr-train/compare.h"

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "lib/audit/run_log.h"
#include "lib/bench/list_args.h"
#include "lib/charts/compare_chart.h"
#include "lib/precision.h"
#include "lib/train/run_outputs.h"
#include "lib/train/trainer.h"
#include "lib/util/atomic_file.h"
#include "lib/util/format.h"
#include "lib/util/svg.h"

namespace srkit {
namespace {

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", double(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::string fixed(double x, int digits) {
  if (x < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

std::string markdown_table(const std::vector<RunSummary>& runs) {
  std::ostringstream out;
  out << "| strategy | train loss | val loss | val ppl | tok/s | weights MiB | master MiB | "
         "grads MiB | opt state MiB | activations MiB | peak MiB | bytes/param |\n"
      << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const RunSummary& r : runs) {
    const auto& p = r.memory.peak;
    auto cat = [&](MemCategory c) { return mib(p[static_cast<int>(c)]); };
    out << "| " << r.strategy << " | " << fixed(r.train_loss, 4) << " | " << fixed(r.val_loss, 4)
        << " | " << fixed(r.val_ppl, 3) << " | " << fixed(r.tokens_per_s, 0) << " | "
        << cat(MemCategory::kWeights) << " | " << cat(MemCategory::kMaster) << " | "
        << cat(MemCategory::kGrads) << " | " << cat(MemCategory::kOptState) << " | "
        << cat(MemCategory::kActivations) << " | " << mib(r.memory.total_peak) << " | "
        << fixed(r.bytes_per_param, 0) << " |\n";
  }
  return out.str();
}

// World, communicator, ZeRO stage, time in collectives and per-rank peak memory.
std::string distributed_line(const RunSummary& r) {
  std::string peaks;
  for (size_t p : r.peak_bytes_per_rank) peaks += (peaks.empty() ? "" : ", ") + mib(p);
  const double share = r.train_seconds > 0 ? 100.0 * r.comm_seconds / r.train_seconds : 0.0;
  return "world " + std::to_string(r.world_size) + " (" + r.comm + "), " +
         (r.zero ? "ZeRO-1" : "plain data parallel") + ", SR seed " + r.sr_seed +
         ": communication " + fixed(r.comm_seconds, 3) + " s (" + fixed(share, 1) +
         "% of training time); peak MiB per rank: " + peaks;
}

void write_json(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return;
  const std::string text = j.dump(2) + "\n";
  write_file_atomic(path, text.data(), text.size());
}

// The chart beside the JSON file: <stem>.svg in its folder (FILE.svg when the
// JSON file itself ends in .svg).
std::string chart_path(const std::string& json_file) {
  std::filesystem::path p(json_file);
  p.replace_extension(".svg");
  if (p == std::filesystem::path(json_file)) p = json_file + ".svg";
  return p.string();
}

// The figure of the runs (lib/charts/compare_chart.h), from their JSONL logs.
// A log that cannot be read (a run stopped before its first step record)
// leaves its strategy without loss curves, named on stderr: the comparison
// itself is done and its table and JSON are written.
void write_chart(const std::string& path, const TrainConfig& base, int world,
                 const std::vector<RunSummary>& runs) {
  std::vector<CompareCurves> curves;
  for (const RunSummary& r : runs) {
    audit::RunLog log;
    try {
      log = audit::read_run_log(r.log_file);
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "%s: no loss curves for %s: %s\n", path.c_str(), r.strategy.c_str(),
                   e.what());
    }
    curves.push_back(compare_curves(r.strategy, log, base.tokens_per_step(world), r.memory));
  }
  // The preset, or the Hugging Face folder that gave the model its shape.
  const std::string model =
      base.init_from.empty() ? "model " + base.model : "from " + base.init_from;
  const std::string title =
      strprintf("sr-train --compare: %s, %llu steps of %llu tokens", model.c_str(),
                static_cast<unsigned long long>(runs.front().steps_total),
                static_cast<unsigned long long>(base.tokens_per_step(world)));
  const std::string svg = svg::render(compare_figure(title, curves));
  write_file_atomic(path, svg.data(), svg.size());
}

// One strategy's run of the comparison: one log per strategy, OUT/<strategy>.jsonl.
TrainConfig strategy_config(const TrainConfig& base, const PrecisionStrategy& strategy) {
  TrainConfig c = base;
  c.strategy = strategy;
  c.log_file.clear();
  return c;
}

}  // namespace

int run_single(const TrainConfig& config, Communicator& comm, const std::string& json_path) {
  if (comm.rank() == 0 && !json_path.empty())
    check_output_files({run_outputs(config)}, {{"--json", json_path}});
  Trainer trainer(config, comm);
  const RunSummary r = trainer.run();
  if (r.rank == 0) {
    std::printf("\n%s\n", markdown_table({r}).c_str());
    if (r.world_size > 1) std::printf("%s\n", distributed_line(r).c_str());
    if (!r.sample.empty()) std::printf("sample:\n%s\n\n", r.sample.c_str());
    std::printf("log: %s\n", r.log_file.c_str());
    if (!r.checkpoint.empty()) std::printf("checkpoint: %s\n", r.checkpoint.c_str());
    write_json(json_path, r.to_json());
  }
  return r.interrupted ? 128 + r.stop_signal : 0;
}

int run_compare(const TrainConfig& config, Communicator& comm, const std::string& strategies,
                const std::string& json_path) {
  // Overrides may contain commas (bf16-sr:m=f32,v=f32); validated before any training.
  const std::vector<PrecisionStrategy> parsed = parse_strategy_list(strategies, "--compare");
  TrainConfig base = config;
  base.validate();
  // The table and its chart must not land on a strategy's log or checkpoint,
  // nor on another live run's files: checked before the first strategy trains.
  const std::string json_file =
      json_path.empty() ? (std::filesystem::path(base.out_dir) / "compare.json").string()
                        : json_path;
  const std::string chart_file = chart_path(json_file);
  if (comm.rank() == 0) {
    std::vector<RunOutputs> outputs;
    for (const PrecisionStrategy& strategy : parsed) {
      outputs.push_back(run_outputs(strategy_config(base, strategy)));
    }
    const std::string json_flag = json_path.empty() ? "--out" : "--json";
    check_output_files(outputs, {{json_flag, json_file}, {json_flag + " (its chart)", chart_file}});
  }
  std::vector<RunSummary> runs;
  nlohmann::json all = {{"config", base.to_json(comm.world_size())},
                        {"runs", nlohmann::json::array()}};
  for (const PrecisionStrategy& strategy : parsed) {
    Trainer trainer(strategy_config(base, strategy), comm);
    runs.push_back(trainer.run());
    all["runs"].push_back(runs.back().to_json());
    if (runs.back().interrupted) break;
  }
  const int code = runs.back().interrupted ? 128 + runs.back().stop_signal : 0;
  if (comm.rank() != 0) return code;
  const std::string table = markdown_table(runs);
  std::printf("\n%s\n", table.c_str());
  if (comm.world_size() > 1) {
    for (const RunSummary& r : runs)
      std::printf("%s: %s\n", r.strategy.c_str(), distributed_line(r).c_str());
  }
  write_json(json_file, all);
  write_chart(chart_file, base, comm.world_size(), runs);
  std::printf("table as JSON: %s; chart: %s; per-step logs: %s/<strategy>.jsonl\n",
              json_file.c_str(), chart_file.c_str(), base.out_dir.c_str());
  return code;
}

}  // namespace srkit
