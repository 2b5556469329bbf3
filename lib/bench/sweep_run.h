// sr-bench sweep, the runner: every cell of the grid that has no result file
// yet, up to `jobs` at a time, each in a child process of its own (fork, then
// the Trainer runs in the child), so cells never share threads, memory or a
// crash. The parent never runs OpenMP or BLAS code itself, which keeps fork safe.
// A cell dies with its parent (PR_SET_PDEATHSIG): a killed sweep leaves no
// orphan cell training on.
#pragma once

#include <cstdio>
#include <vector>

#include "lib/bench/sweep_cell.h"
#include "lib/bench/sweep_grid.h"

namespace srkit {

struct SweepRun {
  std::vector<SweepCellResult> cells;  // grid order (sweep_cells)
  int ran = 0;                         // cells run by this call (the rest were done before)
  bool interrupted = false;            // a stop signal ended it early (cells missing)
};

// Runs the missing cells; one progress line per finished cell on `progress`
// (may be null): cells done / total and the estimated time left. Throws
// std::runtime_error naming the cell, the last line of its output (the reason)
// and its output file when a cell fails other than by diverging (after the
// cells still running have finished).
SweepRun run_sweep(const SweepOptions& options, std::FILE* progress);

}  // namespace srkit
