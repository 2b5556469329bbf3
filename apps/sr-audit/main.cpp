// sr-audit: statistics of rounding errors (bias, calibration) for the number
// formats and rounding modes srkit trains with. Exit codes: 0 success, 2 bad
// usage (unknown flag, bad value), 1 runtime failure.
#include <CLI/CLI.hpp>
#include <vector>

#include "apps/sr-audit/subcommand.h"

int main(int argc, char** argv) {
  using srkit::audit_app::Subcommand;
  CLI::App app{"sr-audit: rounding-error statistics"};
  app.set_version_flag("--version", std::string("sr-audit ") + SRKIT_VERSION);
  app.require_subcommand(1);
  const std::vector<Subcommand> commands = {
      srkit::audit_app::add_cast_command(app), srkit::audit_app::add_accumulate_command(app),
      srkit::audit_app::add_rng_command(app),  srkit::audit_app::add_run_command(app),
      srkit::audit_app::add_plot_command(app),
  };
  return srkit::cli::parse_and_run("sr-audit", app, commands, argc, argv);
}
