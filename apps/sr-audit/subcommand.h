// sr-audit's subcommands, one per file (cast, accumulate, rng, run, plot).
#pragma once

#include "apps/common/subcommand.h"

namespace srkit::audit_app {

using Subcommand = ::srkit::cli::Subcommand;

Subcommand add_cast_command(CLI::App& parent);
Subcommand add_accumulate_command(CLI::App& parent);
Subcommand add_rng_command(CLI::App& parent);
Subcommand add_run_command(CLI::App& parent);
Subcommand add_plot_command(CLI::App& parent);

}  // namespace srkit::audit_app
