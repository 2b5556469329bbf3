// sr-audit is one CLI11 app with one subcommand per file (cast_command.cpp,
// and later fp16/fp8 formats, accumulate, rng, run, plot). Each file defines
// an add_*_command that registers its options on the parent app and returns
// the subcommand plus the action to run once parsing succeeded.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace srkit::audit_app {

struct Subcommand {
  CLI::App* app;
  // Runs after a successful parse; returns the process exit code. Throws
  // std::invalid_argument (one line naming the flag) on bad option values.
  std::function<int()> run;
};

Subcommand add_cast_command(CLI::App& parent);

}  // namespace srkit::audit_app
