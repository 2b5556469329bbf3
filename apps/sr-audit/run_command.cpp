// `sr-audit run LOG.jsonl [LOG2.jsonl ...]`: rounding telemetry of training
// runs over time (erased updates, update/weight ratio, stalled moments), the
// Shadow-FP32 drift per strategy, and stagnation flags.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/common/flag_checks.h"
#include "apps/sr-audit/read_log.h"
#include "apps/sr-audit/subcommand.h"
#include "lib/audit/run_log.h"
#include "lib/charts/group_charts.h"
#include "lib/util/atomic_file.h"
#include "lib/util/svg.h"

namespace srkit::audit_app {
namespace {

nlohmann::json to_json(const audit::RunSummary& r) {
  nlohmann::json windows = nlohmann::json::array();
  for (const audit::WindowSummary& w : r.windows) {
    windows.push_back({{"first_step", w.first_step},
                       {"last_step", w.last_step},
                       {"loss", w.loss},
                       {"erased_frac", w.erased_frac},
                       {"update_weight_ratio", w.update_weight_ratio},
                       {"m_stalled_frac", w.m_stalled_frac},
                       {"v_stalled_frac", w.v_stalled_frac}});
  }
  nlohmann::json j = {
      {"log", r.path}, {"strategy", r.strategy}, {"windows", windows}, {"flags", r.flags}};
  if (r.has_shadow) {
    j["shadow"] = {{"step", r.last_shadow.step},
                   {"mean_abs_ulps", r.last_shadow.mean_abs_ulps},
                   {"max_abs_ulps", r.last_shadow.max_abs_ulps},
                   {"rel_drift", r.last_shadow.rel_drift},
                   {"mean_over_log_ulps", r.mean_shadow_ulps}};
  }
  return j;
}

// Fraction of erased updates against the step, one line per run.
std::string erased_svg(const std::vector<audit::RunLog>& logs) {
  svg::LineChart chart;
  chart.title = "updates below half a bf16 ulp";
  chart.x_label = "step";
  chart.y_label = "erased fraction";
  for (const audit::RunLog& log : logs) {
    svg::Series s{log.strategy + " (" + log.path + ")", {}, {}};
    for (const audit::StepRecord& r : log.steps) {
      s.x.push_back(double(r.step));
      s.y.push_back(r.erased_frac);
    }
    chart.series.push_back(s);
  }
  return svg::render(chart);
}

}  // namespace

Subcommand add_run_command(CLI::App& parent) {
  struct Options {
    std::vector<std::string> logs;
    int windows = 4;
    double threshold = 0.5;
    std::string json, svg, svg_groups;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = parent.add_subcommand(
      "run", "rounding telemetry of sr-train logs over time, shadow drift, stagnation flags");
  cmd->add_option("logs", o->logs, "sr-train JSONL logs")->required()->type_name("LOG.jsonl");
  cmd->add_option("--windows", o->windows, "time windows per run")->capture_default_str();
  cmd->add_option("--stall-threshold", o->threshold,
                  "flag a run when this fraction of updates (or m, v) stalls in its last window")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "write the summary as JSON to FILE")
      ->type_name("FILE")
      ->check(srkit::cli::output_file());
  cmd->add_option("--svg", o->svg, "draw the erased fraction over time as SVG to FILE")
      ->type_name("FILE")
      ->check(srkit::cli::output_file());
  cmd->add_option("--svg-groups", o->svg_groups,
                  "draw the erased fraction and the update/weight ratio per tensor group over "
                  "time as SVG to FILE (two panels per log, one below the other)")
      ->type_name("FILE")
      ->check(srkit::cli::output_file());

  auto run = [o]() {
    std::vector<audit::RunLog> logs;
    std::vector<audit::RunSummary> runs;
    for (const std::string& path : o->logs) {
      logs.push_back(read_log_showing_warnings(path));
      runs.push_back(audit::summarize(logs.back(), o->windows, o->threshold));
    }
    // Before any output: a log without per-group telemetry is bad input.
    const std::string groups_svg = o->svg_groups.empty() ? "" : audit::group_charts_svg(logs);
    std::printf("# sr-audit run: %zu log(s)\n\n", runs.size());
    std::fputs(audit::telemetry_markdown(runs).c_str(), stdout);
    std::printf(
        "\nerased updates: nonzero updates below half a bf16 ulp of the weight (what RN drops); "
        "m/v stalled: moment updates that round back to the old value.\n");
    bool any_shadow = false;
    for (const audit::RunSummary& r : runs) any_shadow = any_shadow || r.has_shadow;
    if (any_shadow) {
      std::printf("\n## Shadow-FP32 drift (last logged step)\n\n%s",
                  audit::shadow_markdown(runs).c_str());
    }
    std::printf("\n");
    for (const audit::RunSummary& r : runs) {
      if (r.flags.empty())
        std::printf("%s (%s): no stagnation\n", r.path.c_str(), r.strategy.c_str());
      for (const std::string& f : r.flags) {
        std::printf("%s (%s): %s\n", r.path.c_str(), r.strategy.c_str(), f.c_str());
      }
    }
    if (!o->json.empty()) {
      nlohmann::json j = {{"command", "run"}, {"runs", nlohmann::json::array()}};
      for (const audit::RunSummary& r : runs) j["runs"].push_back(to_json(r));
      const std::string text = j.dump(2) + "\n";
      write_file_atomic(o->json, text.data(), text.size());
    }
    if (!o->svg.empty()) {
      const std::string text = erased_svg(logs);
      write_file_atomic(o->svg, text.data(), text.size());
    }
    if (!o->svg_groups.empty()) {
      write_file_atomic(o->svg_groups, groups_svg.data(), groups_svg.size());
    }
    return 0;
  };
  return Subcommand{cmd, run};
}

}  // namespace srkit::audit_app
