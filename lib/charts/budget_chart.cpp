#include "lib/charts/budget_chart.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "lib/train/memory_check.h"
#include "lib/util/format.h"

namespace srkit {

svg::Figure budget_figure(const BudgetSearchResult& result) {
  if (result.choices.empty()) throw std::invalid_argument("--svg: the search has no strategies");
  std::vector<std::string> rows, strategies;
  auto index_of = [](std::vector<std::string>& list, const std::string& value) {
    const auto it = std::find(list.begin(), list.end(), value);
    if (it != list.end()) return size_t(it - list.begin());
    list.push_back(value);
    return list.size() - 1;
  };
  auto row_label = [](const BudgetChoice& c) {
    return strprintf("%s T=%d", c.model.c_str(), c.seq_len);
  };
  for (const BudgetChoice& c : result.choices) {
    index_of(rows, row_label(c));
    index_of(strategies, c.strategy);
  }
  const double missing = std::numeric_limits<double>::quiet_NaN();
  svg::BarChart speed, memory;
  speed.title =
      "throughput of the best configuration within " + human_bytes(result.options.budget.bytes);
  speed.value_label = "tokens per second";
  memory.title = "measured peak memory";
  memory.value_label = "fraction of the budget";
  for (svg::BarChart* chart : {&speed, &memory}) {
    chart->categories = rows;
    for (const std::string& s : strategies) {
      chart->series.push_back(
          {s, std::vector<double>(rows.size(), missing), std::vector<std::string>(rows.size())});
    }
  }
  for (const BudgetChoice& c : result.choices) {
    const size_t row = index_of(rows, row_label(c));
    const size_t s = index_of(strategies, c.strategy);
    const CellResult* best = c.chosen_cell();
    if (!best) {
      speed.series[s].notes[row] = memory.series[s].notes[row] = "nothing within the budget";
      continue;
    }
    const double fraction = double(best->memory.total_peak) / double(result.options.budget.bytes);
    speed.series[s].values[row] = best->tokens_per_s;
    speed.series[s].notes[row] = strprintf("%.0f (B %d x %d%s)", best->tokens_per_s, best->batch,
                                           best->grad_accum, best->recompute ? ", recompute" : "");
    memory.series[s].values[row] = fraction;
    memory.series[s].notes[row] = strprintf("%.2f", fraction);
  }
  return svg::Figure{"sr-bench train --memory-budget: " + result.backend, {speed, memory}};
}

}  // namespace srkit
