#include "lib/bench/peak.h"

namespace srkit {

PeakRate device_peak(Backend& backend, double override_gflops, DType compute) {
  if (override_gflops > 0.0) return {override_gflops, "--peak-gflops"};
  return backend.peak_rate(compute);
}

}  // namespace srkit
