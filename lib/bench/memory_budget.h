// The memory-budget question, answered from the analytic memory model
// (lib/train/memory_model.h) without running anything: for a model, strategy,
// world size, ZeRO stage, sequence length and recomputation setting, the
// largest micro-batch whose per-rank total fits a budget. sr-bench memory
// --memory-budget prints these answers; sr-bench train --memory-budget starts
// from them and confirms its choice by running it (lib/bench/budget_search.h).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/train/memory_model.h"

namespace srkit {

// "80GiB", "80 GB", "512MiB", "1.5TiB", "24G" (G, M, K, T: binary), "1e9" (bytes).
// Binary units (KiB..TiB, and K/M/G/T alone) are powers of 1024; decimal ones
// (KB..TB) powers of 1000. Throws std::invalid_argument naming `flag` and what
// was expected on anything else, or on a size of zero.
size_t parse_memory_size(const std::string& text, const std::string& flag);

// A budget: its bytes and where the figure comes from ("--memory-budget 80GiB",
// "free memory of NVIDIA H100 (cudaMemGetInfo)").
struct MemoryBudget {
  size_t bytes = 0;
  std::string source;
};

// `text` is a size (parse_memory_size) or "device": what the backend of
// `device` can still allocate (Backend::available_memory(): a GPU's free
// memory, the host's available memory on cpu). Throws naming --memory-budget.
MemoryBudget resolve_memory_budget(const std::string& text, const std::string& device, int threads);

// The largest micro-batch in [1, max_batch] whose estimate_memory(...).total()
// is at most `budget` (the total grows with the batch), or 0 when B = 1 does not
// fit. scenario.batch is ignored.
int largest_batch_within(MemoryScenario scenario, size_t budget, int max_batch);

// One answer: the scenario at its largest fitting micro-batch (scenario.batch =
// largest_batch), or, when nothing fits, at B = 1 with what it would need.
struct BudgetAnswer {
  MemoryScenario scenario;
  int largest_batch = 0;       // 0: not even B = 1 fits
  MemoryEstimate at_largest;   // estimate at largest_batch (at B = 1 when 0)
  size_t least_bytes = 0;      // total at B = 1: the least this scenario needs
  double batch_vs_mixed = -1;  // largest_batch / mixed's in the same setting; < 0: none
};

struct BudgetMatrixOptions {
  std::vector<GPTConfig> models;
  std::vector<PrecisionStrategy> strategies;  // empty: every preset
  std::vector<int> worlds{1};
  std::vector<int> zeros{0};
  std::vector<bool> recompute{false, true};
  int seq_len = 0;  // 0: each model's maximum
  std::string device = "cpu";
  int threads = 0;
  size_t budget = 0;
  int max_batch = 1 << 16;
};

// Rows in order models, worlds, ZeRO stages, recomputation, strategies.
std::vector<BudgetAnswer> budget_answers(BudgetMatrixOptions options);

// unit: "MiB" or "GiB".
std::string budget_markdown_table(const std::vector<BudgetAnswer>& rows, const MemoryBudget& budget,
                                  const std::string& unit);
nlohmann::json budget_json(const std::vector<BudgetAnswer>& rows, const MemoryBudget& budget);

}  // namespace srkit
