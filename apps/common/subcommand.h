// The command-line shape shared by sr-audit and sr-bench: one CLI11 app with one
// subcommand per file. Each add_*_command registers its options on the parent
// app and returns the subcommand plus the action to run after a good parse.
// Header-only: apps/<name>/ folders with .cpp files become executables.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "apps/common/cpu_environment.h"

namespace srkit::cli {

struct Subcommand {
  CLI::App* app;
  // Returns the exit code. Throws std::invalid_argument (one line naming the
  // flag or file) on bad input.
  std::function<int()> run;
};

// Parses argv and runs the chosen subcommand. Exit codes: the subcommand's own,
// 0 for --help/--version, 2 for bad usage (a parse error,
// std::invalid_argument or a bad SRKIT_CPU_ISA / SRKIT_BF16_GEMM) or running out of memory, 1 for
// any other failure; errors are one line on stderr.
inline int parse_and_run(const std::string& tool, CLI::App& app,
                         const std::vector<Subcommand>& commands, int argc, char** argv) {
  if (const auto error = cpu_environment_error()) {
    std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), error->c_str());
    return 2;
  }
  // A word where the subcommand goes that names none ("sr-audit foo"): CLI11
  // would say only "A subcommand is required"; the word and the choices are
  // what the user needs.
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const Subcommand& c : commands) {
      known = known || c.app->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + c.app->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "%s: error: unknown subcommand '%s'; expected one of: %s (see --help)\n",
                   tool.c_str(), argv[1], names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s (see --help)\n", tool.c_str(), e.what());
    return 2;
  }
  for (const Subcommand& c : commands) {
    if (!c.app->parsed()) continue;
    const std::string name = c.app->get_name();
    try {
      return c.run();
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "%s %s: error: %s\n", tool.c_str(), name.c_str(), e.what());
      return 2;
    } catch (const std::bad_alloc&) {  // never the bare "std::bad_alloc"
      std::fprintf(stderr, "%s %s: error: out of memory while running %s\n", tool.c_str(),
                   name.c_str(), name.c_str());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s %s: error: %s\n", tool.c_str(), name.c_str(), e.what());
      return 1;
    }
  }
  return 0;
}

}  // namespace srkit::cli
