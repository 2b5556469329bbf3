// `sr-audit cast`: rounding-error statistics of fp32 -> bf16 casts (RN, SR and
// RZ as the biased reference) on a chosen input distribution.
#include <omp.h>

#include <cstdio>
#include <memory>
#include <string>

#include "apps/sr-audit/options.h"
#include "apps/sr-audit/subcommand.h"
#include "lib/audit/cast_audit.h"

namespace srkit::audit_app {

Subcommand add_cast_command(CLI::App& parent) {
  struct Options {
    std::string dist = "uniform";
    std::string samples = "1e7";
    audit::CastAuditConfig config;
    int threads = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = parent.add_subcommand(
      "cast", "fp32 -> bf16 casts: bias, z-score, errors and P(up) calibration of RN, SR and RZ");
  audit::DistParams& d = o->config.dist;
  cmd->add_option("--dist", o->dist, "input distribution")
      ->check(CLI::IsMember({"uniform", "normal", "loguniform"}))
      ->capture_default_str();
  cmd->add_option("--a", d.a, "uniform: lower bound")->capture_default_str();
  cmd->add_option("--b", d.b, "uniform: upper bound (exclusive)")->capture_default_str();
  cmd->add_option("--mu", d.mu, "normal: mean")->capture_default_str();
  cmd->add_option("--sigma", d.sigma, "normal: standard deviation")->capture_default_str();
  cmd->add_option("--emin", d.emin, "loguniform: |x| >= 2^emin")->capture_default_str();
  cmd->add_option("--emax", d.emax, "loguniform: |x| < 2^emax")->capture_default_str();
  cmd->add_option("-n,--samples", o->samples, "number of inputs (e.g. 1000000 or 1e6)")
      ->type_name("N")
      ->capture_default_str();
  cmd->add_option("--seed", o->config.seed, "seed of the inputs and of the SR bits")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "OpenMP threads (0: the OpenMP default)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();

  auto run = [o]() {
    o->config.dist.dist = audit::parse_dist(o->dist);
    o->config.samples = parse_count(o->samples, "-n/--samples");
    audit::validate(o->config);
    if (o->threads > 0) omp_set_num_threads(o->threads);
    const std::vector<audit::NamedStats> rows = audit::run_cast_audit(o->config);
    std::printf("# sr-audit cast: fp32 -> bf16, %llu samples of %s, seed %llu\n\n",
                static_cast<unsigned long long>(o->config.samples),
                audit::describe(o->config.dist).c_str(),
                static_cast<unsigned long long>(o->config.seed));
    std::fputs(audit::markdown_table(rows).c_str(), stdout);
    std::printf(
        "\nerror = bf16 result - input. z = bias / standard error (|z| > 4: a real bias). "
        "relative bias = mean of error/|x|. P(up) calibration = mean |P(up) - f| over %d "
        "buckets of the fraction f of x between its neighbours (0 for unbiased SR).\n",
        audit::RoundingStats::kFractionBuckets);
    for (const audit::NamedStats& r : rows) {
      if (r.stats.overflows() > 0) {
        std::printf("%s: %llu results overflowed to Inf (left out of the statistics).\n",
                    r.mode.c_str(), static_cast<unsigned long long>(r.stats.overflows()));
      }
    }
    return 0;
  };
  return Subcommand{cmd, run};
}

}  // namespace srkit::audit_app
