// sr-bench train's outputs: the Markdown table (stdout), the per-phase table
// (--phases), one summary line per strategy, and the CSV and JSON files.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/bench/train_matrix.h"

namespace srkit {

// One row per cell; memory in MiB; OOM cells keep their row, with "OOM".
std::string train_markdown_table(const TrainMatrixResult& result);
// Mean ms per step of forward / backward / optimizer / communication and the
// rest, over all steps of each cell (warm-up included).
std::string train_phases_table(const TrainMatrixResult& result);
// "bf16-sr: 2/2 cells ran; vs mixed 1.21x tok/s, 0.63x peak memory (geometric
// mean of 2 cells); 8 state bytes/param; best MFU 14.2%".
std::vector<std::string> train_strategy_summaries(const TrainMatrixResult& result);
// Header line plus one line per cell; raw units (ms, bytes, fractions).
std::string train_csv(const TrainMatrixResult& result);
nlohmann::json train_json(const TrainMatrixResult& result);
// One cell's JSON object, as in train_json's "cells" (and sr-bench train
// --memory-budget's candidates).
nlohmann::json train_cell_json(const CellResult& cell);

}  // namespace srkit
