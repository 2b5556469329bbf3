// Helpers the CPU kernel benchmarks share: deterministic input arrays, the
// wall time of one call (for benchmarks that interleave a kernel with its
// baseline and time each side themselves), and running what main() registered.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "kernels/cpu/elements.h"

namespace srkit::bench {

// Deterministic values in [-1, 1) (a cheap hash: no RNG state to carry).
template <typename T>
std::vector<T> filled(size_t n, uint32_t salt) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t z = uint32_t(i) * 2654435761u + salt * 40503u;
    z ^= z >> 15;
    z *= 2246822519u;
    z ^= z >> 13;
    v[i] = srkit::cpu::from_f32<T>(float(z >> 8) / float(1 << 23) - 1.0f);
  }
  return v;
}

// Seconds f() takes.
template <typename F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Google Benchmark's main() after the benchmarks are registered: parses the
// --benchmark_* flags, runs, returns the exit status.
inline int run_registered_benchmarks(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace srkit::bench
