// The peak FLOP/s that sr-bench's MFU divides by: the user's --peak-gflops, or
// what the backend reports (Backend::peak_rate: measured sgemm on CPU, the
// datasheet dense bf16 rate on a GPU).
#pragma once

#include "lib/backend/backend.h"

namespace srkit {

// override_gflops when > 0, else backend.peak_rate(), which throws
// std::invalid_argument (naming --peak-gflops) for a GPU not in the datasheet table.
PeakRate device_peak(Backend& backend, double override_gflops);

}  // namespace srkit
