// sr-bench train --memory-budget: throughput at equal memory. For each model and
// strategy, the configurations that keep the optimizer step's tokens fixed
// (micro-batch B x accumulation A = tokens per step / T), with and without
// activation recomputation, are sized by the memory model
// (lib/bench/memory_budget.h); the ones worth running are run through the real
// training loop with the budget as the backend's allocation limit, and the
// fastest whose measured peak is within the budget is the strategy's answer.
// Every candidate stays in the result with why it was or was not run.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lib/bench/memory_budget.h"
#include "lib/bench/train_matrix.h"

namespace srkit {

struct BudgetSearchOptions {
  // models, strategies, seq_len, steps, warmup, device, threads, seed,
  // peak_gflops, sync_phases; batches and mem_limit_bytes are set per candidate.
  TrainMatrixOptions run;
  MemoryBudget budget;
  uint64_t tokens_per_step = 0;  // a multiple of every model's T
  // false: run, per recompute setting, the largest micro-batch that fits, and
  // recomputation only where it allows a larger one (a smaller batch, or the
  // same batch with an extra forward, is not faster on any backend here);
  // true: run every candidate that fits.
  bool all_candidates = false;
};

struct BudgetCandidate {
  CellShape shape;
  size_t model_bytes = 0;  // estimate_memory(...).total()
  // "chosen", "ran", "does not fit (memory model)", "not run: <why>",
  // "over budget when run: <why>", "diverged: <why>".
  std::string status;
  std::optional<CellResult> cell;  // the run, when there was one
  bool within_budget() const;      // ran, and the measured peak is within the budget
};

struct BudgetChoice {
  std::string model, strategy;
  int seq_len = 0;
  std::vector<BudgetCandidate> candidates;  // recompute off, then on; B ascending
  size_t least_bytes = 0;                   // B = 1 with recomputation: the least it needs
  int chosen = -1;                          // index into candidates; -1: none confirmed
  double vs_mixed = -1.0, vs_amp = -1.0;    // chosen tok/s over theirs; < 0: none
  const CellResult* chosen_cell() const;
};

struct BudgetSearchResult {
  BudgetSearchOptions options;
  std::string backend;
  std::map<DType, PeakRate> peaks;
  std::vector<BudgetChoice> choices;  // models, then strategies
};

// The candidates of one model and strategy, sized but not run: micro-batches
// that divide tokens_per_step / T and are powers of two, plus the largest
// divisor that fits, for recompute off and on (none may fit). Throws
// std::invalid_argument when tokens_per_step is not a multiple of T.
std::vector<BudgetCandidate> budget_candidates(const BudgetSearchOptions& options,
                                               const std::string& model,
                                               const PrecisionStrategy& strategy);

// The least memory `strategy` trains `model` in: B = 1 with recomputation.
size_t least_budget_bytes(const BudgetSearchOptions& options, const std::string& model,
                          const PrecisionStrategy& strategy);

// Every model x strategy (all sized and checked before the first run), one
// progress line per run on `progress` (may be null). A strategy that cannot fit
// keeps its row with no choice; when no strategy of a model fits, throws
// std::invalid_argument naming the model, the strategy that needs least, and
// how much.
BudgetSearchResult run_budget_search(BudgetSearchOptions options, std::FILE* progress);

// A table per model of every candidate, then one of the choices.
std::string budget_search_markdown(const BudgetSearchResult& result);
nlohmann::json budget_search_json(const BudgetSearchResult& result);

}  // namespace srkit
