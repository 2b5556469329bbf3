// sr-bench sweep, the runner: every cell of the grid that has no result file
// yet and none in a --carry folder (lib/bench/sweep_carry.h), up to `jobs` at a
// time, each in a child process of its own (lib/bench/sweep_child.h).
#pragma once

#include <cstdio>
#include <vector>

#include "lib/bench/sweep_carry.h"
#include "lib/bench/sweep_cell.h"
#include "lib/bench/sweep_grid.h"

namespace srkit {

struct SweepRun {
  std::vector<SweepCellResult> cells;  // grid order (sweep_cells)
  int ran = 0;                         // cells run by this call (the rest were done before)
  bool interrupted = false;            // a stop signal ended it early (cells missing)
  CarryReport carry;                   // where the cells come from
};

// Runs the missing cells; one progress line per finished cell on `progress`
// (may be null): cells done / total and the estimated time left. Throws
// std::runtime_error naming the cell, the last line of its output (the reason)
// and its output file when a cell fails other than by diverging (after the
// cells still running have finished).
SweepRun run_sweep(const SweepOptions& options, std::FILE* progress);

}  // namespace srkit
