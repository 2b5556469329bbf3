#include "lib/charts/train_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "lib/util/format.h"

namespace srkit {
namespace {

constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

// Index of `value` in `list`, appended when new (first-appearance order).
template <typename T>
size_t index_of(std::vector<T>& list, const T& value) {
  const auto it = std::find(list.begin(), list.end(), value);
  if (it != list.end()) return size_t(it - list.begin());
  list.push_back(value);
  return list.size() - 1;
}

// The row of a cell: the model / micro-batch / sequence length it ran.
std::string row_label(const CellResult& c) {
  return strprintf("%s B=%d T=%d", c.model.c_str(), c.batch, c.seq_len);
}

}  // namespace

svg::Figure train_figure(const TrainMatrixResult& result) {
  if (result.cells.empty()) throw std::invalid_argument("--svg: the matrix has no cells");
  std::vector<std::string> rows, strategies;
  for (const CellResult& c : result.cells) {
    index_of(rows, row_label(c));
    index_of(strategies, c.strategy);
  }
  svg::BarChart speed, memory;
  speed.title = "throughput (median step)";
  speed.value_label = "tokens per second";
  memory.title = "peak memory (backend total)";
  memory.value_label = "MiB";
  for (svg::BarChart* chart : {&speed, &memory}) {
    chart->categories = rows;
    for (const std::string& s : strategies) {
      chart->series.push_back(
          {s, std::vector<double>(rows.size(), kMissing), std::vector<std::string>(rows.size())});
    }
  }
  for (const CellResult& c : result.cells) {
    const size_t row = index_of(rows, row_label(c));
    const size_t s = index_of(strategies, c.strategy);
    if (!c.ok()) {
      speed.series[s].notes[row] = memory.series[s].notes[row] = c.status;
      continue;
    }
    const double mib = double(c.memory.total_peak) / 1048576.0;
    speed.series[s].values[row] = c.tokens_per_s;
    speed.series[s].notes[row] = strprintf("%.0f", c.tokens_per_s);
    memory.series[s].values[row] = mib;
    memory.series[s].notes[row] = strprintf("%.1f", mib);
  }
  return svg::Figure{"sr-bench train: " + result.backend, {speed, memory}};
}

}  // namespace srkit
