// sr-bench: how much faster and leaner is BF16+SR than mixed precision on this
// model and machine (`train`), and what would a run need per rank at scale
// (`memory`), and how does each strategy's loss depend on the learning rate
// (`sweep`). Exit codes: 0 success (cells that ran out of memory included), 2 bad
// usage (unknown flag, bad value), 1 runtime failure.
#include <CLI/CLI.hpp>
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
                                            srkit::bench_app::add_memory_command(app),
                                            srkit::bench_app::add_sweep_command(app)};
  return srkit::cli::parse_and_run("sr-bench", app, commands, argc, argv);
}
