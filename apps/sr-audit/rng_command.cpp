// `sr-audit rng`: quality of the Philox lanes stochastic rounding consumes
// (uniformity, serial / step / purpose correlations, known answers).
#include <omp.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/common/flag_checks.h"
#include "apps/sr-audit/options.h"
#include "apps/sr-audit/subcommand.h"
#include "lib/audit/rng_audit.h"
#include "lib/util/atomic_file.h"
#include "lib/util/svg.h"

namespace srkit::audit_app {
namespace {

nlohmann::json to_json(const audit::RngAuditResult& r) {
  nlohmann::json tests = nlohmann::json::array();
  for (const audit::RngTest& t : r.tests) {
    tests.push_back({{"test", t.name},
                     {"statistic", t.statistic},
                     {"expected", t.expected},
                     {"z", t.z},
                     {"pass", t.pass}});
  }
  return {{"command", "rng"},
          {"samples", r.config.samples},
          {"seed", r.config.seed},
          {"purpose", r.config.purpose},
          {"step", r.config.step},
          {"tests", tests},
          {"histogram_64", r.coarse_histogram},
          {"pass", r.all_pass()}};
}

// Observed counts of lane >> 10 against the uniform expectation.
std::string histogram_svg(const audit::RngAuditResult& r) {
  svg::Histogram h;
  h.title = "Philox 16-bit lanes: 64-bin histogram";
  h.x_label = "lane value";
  h.y_label = "count";
  for (int k = 0; k <= 64; ++k) h.edges.push_back(double(k) * 1024);
  svg::HistogramSeries observed{"observed", {}}, expected{"uniform", {}};
  for (uint64_t c : r.coarse_histogram) {
    observed.values.push_back(double(c));
    expected.values.push_back(double(r.config.samples) / 64);
  }
  h.series = {observed, expected};
  return svg::render(h);
}

}  // namespace

Subcommand add_rng_command(CLI::App& parent) {
  struct Options {
    std::string samples = "1e7";
    audit::RngAuditConfig config;
    int threads = 0;
    std::string json, svg;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = parent.add_subcommand(
      "rng", "Philox 16-bit SR lanes: uniformity, correlations, known answers");
  cmd->add_option("-n,--samples", o->samples, "lanes per stream (e.g. 1e7)")
      ->type_name("N")
      ->capture_default_str();
  cmd->add_option("--seed", o->config.seed, "seed of the streams")->capture_default_str();
  cmd->add_option("--purpose", o->config.purpose, "first purpose (the second is +1)")
      ->capture_default_str();
  cmd->add_option("--step", o->config.step, "first step (the second is +1)")->capture_default_str();
  cmd->add_option("--threads", o->threads, "OpenMP threads (0: the OpenMP default)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  cmd->add_option("--json", o->json, "write the results as JSON to FILE")
      ->type_name("FILE")
      ->check(srkit::cli::output_file());
  cmd->add_option("--svg", o->svg, "draw the lane histogram as SVG to FILE")
      ->type_name("FILE")
      ->check(srkit::cli::output_file());

  auto run = [o]() {
    o->config.samples = parse_count(o->samples, "-n/--samples");
    audit::validate(o->config);
    if (o->threads > 0) omp_set_num_threads(o->threads);
    const audit::RngAuditResult r = audit::run_rng_audit(o->config);
    std::printf(
        "# sr-audit rng: %llu lanes per stream, seed %llu, purpose %u/%u, step %llu/%llu\n\n",
        static_cast<unsigned long long>(r.config.samples),
        static_cast<unsigned long long>(r.config.seed), r.config.purpose, r.config.purpose + 1,
        static_cast<unsigned long long>(r.config.step),
        static_cast<unsigned long long>(r.config.step + 1));
    std::fputs(audit::markdown_table(r).c_str(), stdout);
    std::printf(
        "\nz: the statistic as a standard normal under \"independent uniform 16-bit lanes\" "
        "(chi-square via Wilson-Hilferty, correlation r as r*sqrt(n)); |z| >= %.0f fails.\n"
        "verdict: %s\n",
        audit::kRngFailZ, r.all_pass() ? "all tests pass" : "SOME TESTS FAIL");
    if (!o->json.empty()) {
      const std::string text = to_json(r).dump(2) + "\n";
      write_file_atomic(o->json, text.data(), text.size());
    }
    if (!o->svg.empty()) {
      const std::string text = histogram_svg(r);
      write_file_atomic(o->svg, text.data(), text.size());
    }
    return r.all_pass() ? 0 : 1;
  };
  return Subcommand{cmd, run};
}

}  // namespace srkit::audit_app
