// sr-bench memory: the analytic model (memory_model.h) over a matrix of
// models x strategies x world sizes x ZeRO stages x micro-batches x
// recomputation, with each row's saving against `mixed` in the same setting.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lib/train/memory_model.h"

namespace srkit {

struct MemoryMatrixOptions {
  std::vector<GPTConfig> models;
  std::vector<PrecisionStrategy> strategies;  // parsed by the CLI; empty: every preset
  std::vector<int> worlds{1};
  std::vector<int> zeros{0};
  std::vector<int> batches{1};
  int seq_len = 0;  // 0: each model's maximum
  std::vector<bool> recompute{false};
  std::string device = "cpu";
  int threads = 0;  // CPU threads (GEMM scratch); 0: OpenMP default
};

struct MemoryRow {
  MemoryScenario scenario;
  MemoryEstimate estimate;
  std::optional<double> saving_vs_mixed;  // 1 - total / mixed's total; none without mixed
  std::optional<size_t> measured_total;   // Backend::memory().total_peak of a real step
};

// Rows in order models, batches, worlds, ZeRO stages, recomputation, strategies.
// Throws std::invalid_argument naming the flag on an impossible scenario.
std::vector<MemoryRow> memory_rows(MemoryMatrixOptions options);

// unit: "MiB" or "GiB".
std::string memory_markdown_table(const std::vector<MemoryRow>& rows, const std::string& unit);
std::string memory_csv(const std::vector<MemoryRow>& rows);
nlohmann::json memory_json(const std::vector<MemoryRow>& rows);
// GiB when the largest total is at least 10 GiB, else MiB.
std::string memory_auto_unit(const std::vector<MemoryRow>& rows);
// The same rule for one figure: "GiB" from 10 GiB up, else "MiB".
std::string memory_unit_for(size_t largest_bytes);
// `bytes` in `unit` ("MiB" or "GiB") as the tables print it: %.1f MiB, %.2f GiB.
std::string bytes_in_unit(size_t bytes, const std::string& unit);

}  // namespace srkit
