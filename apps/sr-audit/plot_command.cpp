// `sr-audit plot LOG.jsonl [LOG2.jsonl ...]`: training and validation loss of
// several runs (e.g. one per strategy) in one chart.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/common/flag_checks.h"
#include "apps/sr-audit/read_log.h"
#include "apps/sr-audit/subcommand.h"
#include "lib/audit/run_log.h"
#include "lib/util/atomic_file.h"
#include "lib/util/format.h"
#include "lib/util/svg.h"

namespace srkit::audit_app {

Subcommand add_plot_command(CLI::App& parent) {
  struct Options {
    std::vector<std::string> logs;
    std::string svg = "loss.svg";
    std::string json;
    std::string title = "training loss";
    bool log_y = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd =
      parent.add_subcommand("plot", "loss and val-loss curves of several sr-train runs as SVG");
  cmd->add_option("logs", o->logs, "sr-train JSONL logs")->required()->type_name("LOG.jsonl");
  cmd->add_option("--svg", o->svg, "output SVG file")
      ->type_name("FILE")
      ->capture_default_str()
      ->check(srkit::cli::output_file());
  cmd->add_option("--json", o->json, "write the plotted series as JSON to FILE")
      ->type_name("FILE")
      ->check(srkit::cli::output_file());
  cmd->add_option("--title", o->title, "chart title")->capture_default_str();
  cmd->add_flag("--log-y", o->log_y, "logarithmic loss axis");

  auto run = [o]() {
    if (o->svg.empty()) throw std::invalid_argument("--svg: an output file is required");
    svg::LineChart chart;
    chart.title = o->title;
    chart.x_label = "step";
    chart.y_label = "loss";
    chart.log_y = o->log_y;
    nlohmann::json runs = nlohmann::json::array();
    std::string table =
        "| run | strategy | steps | final loss | min loss | final val loss |\n"
        "|---|---|---:|---:|---:|---:|\n";
    for (const std::string& path : o->logs) {
      const audit::RunLog log = read_log_showing_warnings(path);
      svg::Series train{log.strategy + " loss", {}, {}}, val{log.strategy + " val", {}, {}};
      double min_loss = log.steps.front().loss;
      for (const audit::StepRecord& r : log.steps) {
        train.x.push_back(double(r.step));
        train.y.push_back(r.loss);
        min_loss = std::min(min_loss, r.loss);
      }
      for (const audit::EvalRecord& e : log.evals) {
        val.x.push_back(double(e.step));
        val.y.push_back(e.val_loss);
      }
      chart.series.push_back(train);
      if (!val.x.empty()) chart.series.push_back(val);
      const std::string final_val = val.y.empty() ? "-" : strprintf("%.4f", val.y.back());
      table +=
          strprintf("| %s | %s | %llu | %.4f | %.4f | %s |\n", path.c_str(), log.strategy.c_str(),
                    static_cast<unsigned long long>(log.steps.back().step), log.steps.back().loss,
                    min_loss, final_val.c_str());
      runs.push_back({{"log", path},
                      {"strategy", log.strategy},
                      {"step", train.x},
                      {"loss", train.y},
                      {"val_step", val.x},
                      {"val_loss", val.y}});
    }
    const std::string text = svg::render(chart);
    write_file_atomic(o->svg, text.data(), text.size());
    std::printf("# sr-audit plot: %zu run(s) -> %s\n\n%s", o->logs.size(), o->svg.c_str(),
                table.c_str());
    if (!o->json.empty()) {
      const std::string j = nlohmann::json{{"command", "plot"}, {"runs", runs}}.dump(2) + "\n";
      write_file_atomic(o->json, j.data(), j.size());
    }
    return 0;
  };
  return Subcommand{cmd, run};
}

}  // namespace srkit::audit_app
