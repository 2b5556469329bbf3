// `sr-audit cast`: rounding-error statistics of fp32 -> bf16 / fp16 / fp8 casts
// (RN, SR and RZ as the biased reference) on a chosen input distribution.
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/common/flag_checks.h"
#include "apps/sr-audit/options.h"
#include "apps/sr-audit/subcommand.h"
#include "lib/audit/accumulate.h"
#include "lib/audit/cast_audit.h"
#include "lib/util/atomic_file.h"
#include "lib/util/svg.h"

namespace srkit::audit_app {
namespace {

nlohmann::json to_json(const audit::NamedStats& r) {
  const audit::RoundingStats& s = r.stats;
  nlohmann::json buckets = nlohmann::json::array();
  for (int b = 0; b < audit::RoundingStats::kFractionBuckets; ++b) {
    if (s.bucket_count(b) == 0) continue;
    buckets.push_back({{"bucket", b},
                       {"count", s.bucket_count(b)},
                       {"mean_f", s.bucket_mean_f(b)},
                       {"p_up", s.bucket_p_up(b)}});
  }
  nlohmann::json hist = nlohmann::json::array();
  for (int k = 0; k < audit::RoundingStats::kErrorBins; ++k) hist.push_back(s.error_bin(k));
  return {{"format", r.format},
          {"mode", r.mode},
          {"count", s.count()},
          {"out_of_range", s.overflows()},
          {"bias", s.mean_error()},
          {"bias_ulps", s.mean_error_ulps()},
          {"z", s.z_score()},
          {"relative_bias", s.relative_bias()},
          {"mse", s.mse()},
          {"error_variance", s.error_variance()},
          {"variance_ratio", s.variance_ratio()},
          {"mean_abs_error", s.mean_abs_error()},
          {"max_abs_error", s.max_abs_error()},
          {"calibration_error", s.calibration_error()},
          {"chi_square", s.chi_square()},
          {"chi_square_dof", s.chi_square_dof()},
          {"unbiased", s.unbiased()},
          {"calibrated", s.calibrated()},
          {"verdict", s.verdict(r.format + " " + r.mode)},
          {"fraction_buckets", buckets},
          {"error_histogram_ulps", hist}};
}

// Error / ulp histogram, one bar series per (format, mode).
std::string histogram_svg(const std::vector<audit::NamedStats>& rows) {
  svg::Histogram chart;
  chart.title = "rounding error of fp32 casts";
  chart.x_label = "error / ulp";
  chart.y_label = "fraction of samples";
  const int bins = audit::RoundingStats::kErrorBins;
  for (int k = 0; k <= bins; ++k) chart.edges.push_back(-1.0 + 2.0 * k / bins);
  for (const audit::NamedStats& r : rows) {
    svg::HistogramSeries s{r.format + " " + r.mode, {}};
    for (int k = 0; k < bins; ++k) {
      s.values.push_back(double(r.stats.error_bin(k)) /
                         double(std::max<uint64_t>(1, r.stats.count())));
    }
    chart.series.push_back(s);
  }
  return svg::render(chart);
}

// P(up) against the mean fraction per bucket, with the ideal P(up) = f.
std::string calibration_svg(const std::vector<audit::NamedStats>& rows) {
  svg::LineChart chart;
  chart.title = "P(round up) calibration";
  chart.x_label = "fraction f between neighbours";
  chart.y_label = "P(round up)";
  chart.series.push_back({"ideal (P = f)", {0.0, 1.0}, {0.0, 1.0}});
  for (const audit::NamedStats& r : rows) {
    svg::Series s{r.format + " " + r.mode, {}, {}};
    for (int b = 0; b < audit::RoundingStats::kFractionBuckets; ++b) {
      if (r.stats.bucket_count(b) == 0) continue;
      s.x.push_back(r.stats.bucket_mean_f(b));
      s.y.push_back(r.stats.bucket_p_up(b));
    }
    chart.series.push_back(s);
  }
  return svg::render(chart);
}

}  // namespace

Subcommand add_cast_command(CLI::App& parent) {
  struct Options {
    std::string formats = "bf16";
    std::string dist = "uniform";
    std::string fractions = "0.1,0.25,0.5,0.75,0.9";
    std::string samples = "1e7";
    audit::CastAuditConfig config;
    int threads = 0;
    std::string json, svg, svg_kind = "histogram";
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = parent.add_subcommand(
      "cast",
      "fp32 -> bf16/fp16/fp8 casts: bias, z, variance, MSE, P(up) chi-square of RN, SR and RZ");
  audit::DistParams& d = o->config.dist;
  cmd->add_option("--format", o->formats, "target formats: bf16,fp16,e4m3,e5m2 or all")
      ->capture_default_str();
  cmd->add_option("--dist", o->dist, "input distribution: uniform, normal, loguniform or grid")
      ->capture_default_str();
  cmd->add_option("--a", d.a, "uniform: lower bound")->capture_default_str();
  cmd->add_option("--b", d.b, "uniform: upper bound (exclusive)")->capture_default_str();
  cmd->add_option("--mu", d.mu, "normal: mean")->capture_default_str();
  cmd->add_option("--sigma", d.sigma, "normal: standard deviation")->capture_default_str();
  cmd->add_option("--emin", d.emin, "loguniform: |x| >= 2^emin; grid: lowest exponent")
      ->capture_default_str();
  cmd->add_option("--emax", d.emax, "loguniform: |x| < 2^emax; grid: exponents below emax")
      ->capture_default_str();
  cmd->add_option("--fractions", o->fractions,
                  "grid: positions in (0, 1) between two neighbours, comma-separated")
      ->capture_default_str();
  cmd->add_option("-n,--samples", o->samples, "number of inputs (e.g. 1000000 or 1e6)")
      ->type_name("N")
      ->capture_default_str();
  cmd->add_option("--seed", o->config.seed, "seed of the inputs and of the SR bits")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "OpenMP threads (0: the OpenMP default)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  cmd->add_option("--json", o->json, "write the statistics as JSON to FILE")
      ->type_name("FILE")
      ->check(srkit::cli::output_file());
  cmd->add_option("--svg", o->svg, "draw the chart chosen by --svg-kind as SVG to FILE")
      ->type_name("FILE")
      ->check(srkit::cli::output_file());
  cmd->add_option("--svg-kind", o->svg_kind,
                  "histogram (error per mode) or calibration (P(up) against f)")
      ->capture_default_str();

  auto run = [o]() {
    const std::vector<FpFormat> formats = audit::parse_format_list(o->formats, "--format");
    o->config.dist.dist = audit::parse_dist(o->dist);
    o->config.dist.fractions = audit::parse_fractions(o->fractions);
    o->config.samples = parse_count(o->samples, "-n/--samples");
    if (o->svg_kind != "histogram" && o->svg_kind != "calibration") {
      throw std::invalid_argument("--svg-kind: expected histogram or calibration, got '" +
                                  o->svg_kind + "'");
    }
    for (FpFormat f : formats) {
      audit::CastAuditConfig c = o->config;
      c.format = f;
      audit::validate(c);  // every format before any work
    }
    if (o->threads > 0) omp_set_num_threads(o->threads);
    std::vector<audit::NamedStats> rows;
    for (FpFormat f : formats) {
      audit::CastAuditConfig c = o->config;
      c.format = f;
      for (audit::NamedStats& r : audit::run_cast_audit(c)) rows.push_back(std::move(r));
    }
    std::printf("# sr-audit cast: fp32 -> %s, %llu samples of %s, seed %llu\n\n",
                o->formats.c_str(), static_cast<unsigned long long>(o->config.samples),
                audit::describe(o->config.dist).c_str(),
                static_cast<unsigned long long>(o->config.seed));
    std::fputs(audit::markdown_table(rows).c_str(), stdout);
    std::printf(
        "\nerror = rounded - input; bias (ulps) = mean of error/ulp(x). z = bias / standard "
        "error. var / f(1-f)ulp^2 = error variance over SR's theoretical variance (1 for SR). "
        "P(up) calibration = mean |P(up) - f| over %d buckets of the fraction f of x between its "
        "neighbours; chi2 tests P(up) = f per bucket (dof = buckets with 0 < f < 1).\n\n",
        audit::RoundingStats::kFractionBuckets);
    std::fputs(audit::verdicts(rows).c_str(), stdout);
    for (const audit::NamedStats& r : rows) {
      if (r.stats.overflows() > 0) {
        std::printf("%s %s: %llu inputs beyond the largest finite value (left out).\n",
                    r.format.c_str(), r.mode.c_str(),
                    static_cast<unsigned long long>(r.stats.overflows()));
      }
    }
    if (!o->json.empty()) {
      nlohmann::json j = {{"command", "cast"},
                          {"distribution", audit::describe(o->config.dist)},
                          {"samples", o->config.samples},
                          {"seed", o->config.seed},
                          {"z_critical", audit::kBiasZCritical}};
      j["rows"] = nlohmann::json::array();
      for (const audit::NamedStats& r : rows) j["rows"].push_back(to_json(r));
      const std::string text = j.dump(2) + "\n";
      write_file_atomic(o->json, text.data(), text.size());
    }
    if (!o->svg.empty()) {
      const std::string text =
          o->svg_kind == "calibration" ? calibration_svg(rows) : histogram_svg(rows);
      write_file_atomic(o->svg, text.data(), text.size());
    }
    return 0;
  };
  return Subcommand{cmd, run};
}

}  // namespace srkit::audit_app
