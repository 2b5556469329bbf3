// sr-bench train --svg: throughput and peak memory of every cell as grouped
// bars, one row per model / micro-batch cell and one bar per strategy.
#pragma once

#include "lib/bench/train_matrix.h"
#include "lib/util/svg.h"

namespace srkit {

// Two panels: tok/s at the median step, and the backend's peak memory (MiB).
// Each bar carries its value; a cell that did not run has no bar and carries
// its status ("OOM", "diverged").
svg::Figure train_figure(const TrainMatrixResult& result);

}  // namespace srkit
