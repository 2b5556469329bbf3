// sr-audit: statistics of rounding errors (bias, calibration) for the number
// formats and rounding modes srkit trains with. Exit codes: 0 success, 2 bad
// usage (unknown flag, bad value), 1 runtime failure.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <vector>

#include "apps/sr-audit/subcommand.h"

namespace srkit::audit_app {  // defined in the *_command.cpp files beside cast's
Subcommand add_accumulate_command(CLI::App& parent);
Subcommand add_rng_command(CLI::App& parent);
Subcommand add_run_command(CLI::App& parent);
Subcommand add_plot_command(CLI::App& parent);
}  // namespace srkit::audit_app

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
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "sr-audit: error: %s\n", e.what());
    return 2;
  }
  for (const Subcommand& c : commands) {
    if (!c.app->parsed()) continue;
    try {
      return c.run();
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "sr-audit %s: error: %s\n", c.app->get_name().c_str(), e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sr-audit %s: error: %s\n", c.app->get_name().c_str(), e.what());
      return 1;
    }
  }
  return 0;
}
