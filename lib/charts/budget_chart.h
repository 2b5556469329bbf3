// sr-bench train --memory-budget --svg: each strategy's best throughput within
// the budget as grouped bars, one row per model and one bar per strategy.
#pragma once

#include "lib/bench/budget_search.h"
#include "lib/util/svg.h"

namespace srkit {

// Two panels: tok/s of each strategy's chosen configuration (its note: the
// micro-batch x accumulation and recomputation), and its measured peak as a
// fraction of the budget. A strategy with nothing confirmed has no bar and says so.
svg::Figure budget_figure(const BudgetSearchResult& result);

}  // namespace srkit
