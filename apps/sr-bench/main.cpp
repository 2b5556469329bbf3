// sr-bench: how much faster and leaner is BF16+SR than mixed precision on this
// model and machine (`train`), and what would a run need per rank at scale
// (`memory`). Exit codes: 0 success (cells that ran out of memory included),
// 2 bad usage (unknown flag, bad value), 1 runtime failure.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <vector>

#include "apps/sr-bench/subcommand.h"

int main(int argc, char** argv) {
  using srkit::bench_app::Subcommand;
  CLI::App app{"sr-bench: throughput and memory of precision strategies"};
  app.set_version_flag("--version", std::string("sr-bench ") + SRKIT_VERSION);
  app.require_subcommand(1);
  // A later flag overrides an earlier one, so scripts can append to a base command.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  const std::vector<Subcommand> commands = {srkit::bench_app::add_train_command(app),
                                            srkit::bench_app::add_memory_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "sr-bench: error: %s (see --help)\n", e.what());
    return 2;
  }
  for (const Subcommand& c : commands) {
    if (!c.app->parsed()) continue;
    try {
      return c.run();
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "sr-bench %s: error: %s\n", c.app->get_name().c_str(), e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sr-bench %s: error: %s\n", c.app->get_name().c_str(), e.what());
      return 1;
    }
  }
  return 0;
}
