// sr-bench sweep across machines: cells finished elsewhere count as done.
//
// A GPU session has minutes, a learning-rate grid hours; so each session runs
// some cells and commits their result files (OUT/cells/.../result.json: the
// numbers, the loss curves, the configuration and the environment they ran
// in), and a later sweep of the same grid, given those folders with --carry,
// takes every cell they hold instead of running it, and reports from all.
//
// Same numerics, decided by the bits: before its cells run, a sweep trains
// one step of each strategy of the grid on this machine (the numerics probe)
// and records the final weights' checksum in every result it writes. A cell
// from another folder is taken only when its configuration (with data files
// compared by name; the probe compares their contents) and its strategy's
// probe equal this sweep's: the same code paths on the same kind of device
// give those bits, another kernel, build or data does not. A cell from another
// device or build whose probe still matches is taken and named as such in the
// report; every cell that is not taken is listed with the reason, never mixed
// in and never silently dropped.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/bench/sweep_cell.h"
#include "lib/bench/sweep_grid.h"

namespace srkit {

// This machine's environment record: {"device", "build_type", "git_commit",
// "probe": {strategy: checksum}}, from one-step runs of each strategy of the
// grid in child processes (folders OUT/probe/<strategy>/; sweep_run.cpp runs
// them). Throws naming the strategy when a probe fails.
nlohmann::json probe_environment(const SweepOptions& options);

struct CarriedCell {
  std::string source;         // the --carry folder
  std::string device;         // where it ran
  bool other_device = false;  // device or build type differ from this machine's
};

struct CarryReport {
  int run_here = 0;                                     // cells this call ran
  int done_before = 0;                                  // cells this folder already held
  std::vector<std::pair<size_t, CarriedCell>> carried;  // cell index, where from
  std::vector<std::string> excluded;  // "<result file>: <why>", one per cell not taken
};

// For every cell without a result (done[i] false): the first --carry folder
// holding a usable result of it; that result is copied into the cell's folder
// (so this folder holds the union) and set in results[i], done[i] = true.
void carry_cells(const SweepOptions& options, const std::vector<SweepCell>& cells,
                 const nlohmann::json& environment, std::vector<SweepCellResult>& results,
                 std::vector<bool>& done, CarryReport& report);

// The report's section on where the cells ran, Markdown and JSON.
std::string carry_markdown(const SweepOptions& options, const std::vector<SweepCell>& cells,
                           const CarryReport& report);
nlohmann::json carry_json(const std::vector<SweepCell>& cells, const CarryReport& report);

}  // namespace srkit
