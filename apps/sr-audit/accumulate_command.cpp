// `sr-audit accumulate`: x += delta repeated n times in each narrow format,
// exact sum vs fp32, RN, SR and Kahan; or (--sweep) the final error over a
// log-spaced range of delta/ulp(x0).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/common/flag_checks.h"
#include "apps/sr-audit/options.h"
#include "apps/sr-audit/subcommand.h"
#include "lib/audit/accumulate.h"
#include "lib/util/atomic_file.h"
#include "lib/util/format.h"
#include "lib/util/svg.h"

namespace srkit::audit_app {
namespace {

nlohmann::json to_json(const audit::AccumulateResult& r) {
  nlohmann::json methods = nlohmann::json::array();
  for (const audit::MethodResult& m : r.methods) {
    nlohmann::json j = {{"method", audit::accum_method_name(m.method)},
                        {"final", m.final_value},
                        {"rel_error", m.rel_error},
                        {"rel_error_std", m.rel_error_std},
                        {"error_ulps", m.rms_error_ulps},
                        {"stall_step", m.stall_step},
                        {"stall_value", m.stall_value}};
    if (!m.trace.empty()) j["trace_ulps"] = m.trace;
    methods.push_back(j);
  }
  nlohmann::json out = {{"format", fp_format_name(r.config.format)},
                        {"x0", r.x0},
                        {"delta", r.delta},
                        {"delta_over_ulp", r.delta / r.ulp0},
                        {"steps", r.config.steps},
                        {"repeats", r.config.repeats},
                        {"seed", r.config.seed},
                        {"exact", r.exact},
                        {"methods", methods}};
  if (!r.trace_steps.empty()) out["trace_steps"] = r.trace_steps;
  return out;
}

// Trajectories of the first format: error in ulps of x0 against the step.
std::string trajectory_svg(const audit::AccumulateResult& r) {
  svg::LineChart chart;
  chart.title = std::string("x += delta in ") + fp_format_name(r.config.format) +
                strprintf(" (delta = %.3g ulp)", r.delta / r.ulp0);
  chart.x_label = "step";
  chart.y_label = "x - exact (ulps of x0)";
  for (const audit::MethodResult& m : r.methods) {
    svg::Series s{audit::accum_method_name(m.method), {}, {}};
    for (size_t k = 0; k < m.trace.size(); ++k) {
      s.x.push_back(double(r.trace_steps[k]));
      s.y.push_back(m.trace[k]);
    }
    chart.series.push_back(s);
  }
  return svg::render(chart);
}

// Sweep: |relative error| against delta/ulp on log-log axes, one line per
// (format, method) for RN, SR and Kahan.
std::string sweep_svg(const std::vector<audit::AccumulateResult>& runs) {
  svg::LineChart chart;
  chart.title = "final |relative error| of x += delta";
  chart.x_label = "delta / ulp(x0)";
  chart.y_label = "|relative error|";
  chart.log_x = chart.log_y = true;
  for (int m = 1; m < audit::kAccumMethods; ++m) {
    for (int f = 0; f < kFpFormatCount; ++f) {
      svg::Series s{std::string(fp_format_name(FpFormat(f))) + " " +
                        audit::accum_method_name(audit::AccumMethod(m)),
                    {},
                    {}};
      for (const audit::AccumulateResult& r : runs) {
        if (r.config.format != FpFormat(f)) continue;
        // Exact results have no place on a log axis: floor at 1e-12.
        s.x.push_back(r.delta / r.ulp0);
        s.y.push_back(std::max(1e-12, std::fabs(r.methods[size_t(m)].rel_error)));
      }
      if (!s.x.empty()) chart.series.push_back(s);
    }
  }
  return svg::render(chart);
}

}  // namespace

Subcommand add_accumulate_command(CLI::App& parent) {
  struct Options {
    std::string formats = "all";
    std::string steps = "1e4";
    double x0 = 1.0;
    double ratio = 0.1;
    double delta = 0.0;
    uint32_t repeats = 16;
    uint64_t seed = 1;
    bool sweep = false;
    double ratio_min = 1e-3, ratio_max = 10;
    int per_decade = 4;
    std::string json, svg;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = parent.add_subcommand(
      "accumulate", "x += delta repeated n times: exact vs fp32, RN, SR and Kahan per format");
  cmd->add_option("--format", o->formats, "formats: bf16,fp16,e4m3,e5m2 or all")
      ->capture_default_str();
  cmd->add_option("--x0", o->x0, "start value (rounded to each format)")->capture_default_str();
  cmd->add_option("--ratio", o->ratio, "delta as a multiple of ulp(x0) in each format")
      ->capture_default_str();
  cmd->add_option("--delta", o->delta, "absolute delta for every format (overrides --ratio)");
  cmd->add_option("-n,--steps", o->steps, "additions per run (e.g. 10000 or 1e4)")
      ->type_name("N")
      ->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "independent SR runs (error spread)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the SR bits")->capture_default_str();
  cmd->add_flag("--sweep", o->sweep, "sweep delta/ulp(x0) from --ratio-min to --ratio-max");
  cmd->add_option("--ratio-min", o->ratio_min, "sweep: smallest delta/ulp")->capture_default_str();
  cmd->add_option("--ratio-max", o->ratio_max, "sweep: largest delta/ulp")->capture_default_str();
  cmd->add_option("--per-decade", o->per_decade, "sweep: points per factor of 10")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "write the results as JSON to FILE")
      ->type_name("FILE")
      ->check(srkit::cli::output_file());
  cmd->add_option("--svg", o->svg, "draw trajectories (or the sweep) as SVG to FILE")
      ->type_name("FILE")
      ->check(srkit::cli::output_file());

  auto run = [o]() {
    const std::vector<FpFormat> formats = audit::parse_format_list(o->formats, "--format");
    const uint64_t steps = parse_count(o->steps, "-n/--steps");
    const std::vector<double> ratios =
        o->sweep ? audit::sweep_ratios(o->ratio_min, o->ratio_max, o->per_decade)
                 : std::vector<double>{o->ratio};
    std::vector<audit::AccumulateResult> runs;
    for (FpFormat f : formats) {
      for (double ratio : ratios) {
        audit::AccumulateConfig c;
        c.format = f;
        c.x0 = o->x0;
        c.steps = steps;
        c.repeats = o->repeats;
        c.seed = o->seed;
        c.trace_points = o->svg.empty() || o->sweep ? 0 : 200;
        const float x0 = fp_round(f, RoundMode::kRN, float(o->x0), 0);
        c.delta = o->delta != 0.0 && !o->sweep ? o->delta : ratio * fp_format_ulp(f, x0);
        runs.push_back(audit::run_accumulate(c));
      }
    }
    std::printf("# sr-audit accumulate: x += delta, %llu steps, %u SR repeats, seed %llu\n\n",
                static_cast<unsigned long long>(steps), o->repeats,
                static_cast<unsigned long long>(o->seed));
    std::fputs(
        o->sweep ? audit::sweep_markdown_table(runs).c_str() : audit::markdown_table(runs).c_str(),
        stdout);
    std::printf(
        "\nrel error = (final - exact) / exact (SR: mean over repeats, std = its spread). "
        "error/ulp = |final - exact| in ulps of x0 (SR: root mean square). A stall is the first "
        "step whose rounded sum equals x: every later update is erased.\n");
    if (!o->json.empty()) {
      nlohmann::json j = {{"command", "accumulate"}, {"sweep", o->sweep}};
      j["runs"] = nlohmann::json::array();
      for (const auto& r : runs) j["runs"].push_back(to_json(r));
      const std::string text = j.dump(2) + "\n";
      write_file_atomic(o->json, text.data(), text.size());
    }
    if (!o->svg.empty()) {
      const std::string text = o->sweep ? sweep_svg(runs) : trajectory_svg(runs.front());
      write_file_atomic(o->svg, text.data(), text.size());
    }
    return 0;
  };
  return Subcommand{cmd, run};
}

}  // namespace srkit::audit_app
