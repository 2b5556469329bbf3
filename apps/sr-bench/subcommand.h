// sr-bench's subcommands, one per file (train, memory, sweep).
#pragma once

#include "apps/common/subcommand.h"

namespace srkit::bench_app {

using Subcommand = ::srkit::cli::Subcommand;

Subcommand add_train_command(CLI::App& parent);
Subcommand add_memory_command(CLI::App& parent);
Subcommand add_sweep_command(CLI::App& parent);

}  // namespace srkit::bench_app
