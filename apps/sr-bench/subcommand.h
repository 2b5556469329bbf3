// sr-bench is one CLI11 app with one subcommand per file (train_command.cpp,
// memory_command.cpp). Each add_*_command registers its options on the parent
// app and returns the subcommand plus the action to run after a good parse.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace srkit::bench_app {

struct Subcommand {
  CLI::App* app;
  // Returns the exit code. Throws std::invalid_argument (one line naming the
  // flag) on bad option values.
  std::function<int()> run;
};

Subcommand add_train_command(CLI::App& parent);
Subcommand add_memory_command(CLI::App& parent);

}  // namespace srkit::bench_app
