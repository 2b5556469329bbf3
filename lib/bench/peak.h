// The peak FLOP/s that sr-bench's MFU divides by for steps computing in
// `compute`: the user's --peak-gflops (for every dtype), or what the backend
// reports (Backend::peak_rate: measured GEMM rate on CPU, datasheet rate on a
// GPU).
#pragma once

#include "lib/backend/backend.h"

namespace srkit {

// override_gflops when > 0, else backend.peak_rate(compute), which throws
// std::invalid_argument (naming --peak-gflops) for a GPU not in the datasheet table.
PeakRate device_peak(Backend& backend, double override_gflops, DType compute);

}  // namespace srkit
