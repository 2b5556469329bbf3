// Array casts fp32 <-> bf16 against a plain memcpy moving the same bytes.
// Every benchmark moves 1.5x the fp32 array size per pass (fp32 read + bf16
// written, or bf16 read + fp32 written); bytes_per_second counts reads plus
// writes. vs_memcpy is that rate divided by a parallel memcpy of 0.75x the fp32
// size, timed in the same process just before the benchmark (same threads,
// same bytes), so it tracks noise on a shared machine.
// Run with OMP_NUM_THREADS=2 (the figures in BENCHMARKS.md).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/sr_bits.h"
#include "kernels/cpu/cast.h"

namespace {

using srkit::bf16;

constexpr size_t kMinBytes = size_t(256) << 10;  // fits in L2
constexpr size_t kMaxBytes = size_t(256) << 20;

// Owning buffer whose pages are touched by the threads that will use them.
template <typename T>
struct Buffer {
  explicit Buffer(size_t n) : data(new T[n]), size(n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) std::memset(&data[i], 0, sizeof(T));
  }
  std::unique_ptr<T[]> data;
  size_t size;
};

// Normal-ish floats with varied exponents (no specials): a splitmix hash of i.
float sample(size_t i) {
  uint64_t z = (uint64_t(i) + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const float mant = 1.0f + float(z & 0xffffff) / float(1 << 24);
  const int exp = int((z >> 24) & 15) - 8;
  return ((z >> 40) & 1 ? -1.0f : 1.0f) * std::ldexp(mant, exp);
}

void parallel_copy(char* dst, const char* src, size_t bytes) {
#pragma omp parallel
  {
    const size_t t = size_t(omp_get_thread_num()), nt = size_t(omp_get_num_threads());
    const size_t lo = bytes * t / nt, hi = bytes * (t + 1) / nt;
    std::memcpy(dst + lo, src + lo, hi - lo);
  }
}

// Bytes/s (read + written) of a parallel memcpy of `bytes`: median of 7 timed
// batches of copies, each batch long enough (>= 2 ms) to time well.
double memcpy_rate(size_t bytes) {
  Buffer<char> src(bytes), dst(bytes);
  using Clock = std::chrono::steady_clock;
  auto copies = [&](int k) {
    const auto t0 = Clock::now();
    for (int i = 0; i < k; ++i) parallel_copy(dst.data.get(), src.data.get(), bytes);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  int per_batch = 1;
  while (copies(per_batch) < 2e-3) per_batch *= 2;
  std::vector<double> rates;
  for (int batch = 0; batch < 7; ++batch) {
    rates.push_back(2.0 * double(bytes) * per_batch / copies(per_batch));
  }
  std::nth_element(rates.begin(), rates.begin() + 3, rates.end());
  return rates[3];
}

// Runs the timed loop, then records bytes moved and the ratio against the
// memcpy rate measured just before (same process, threads and bytes).
template <typename Body>
void run_against_memcpy(benchmark::State& state, size_t bytes_per_pass, Body&& body) {
  const double reference = memcpy_rate(bytes_per_pass / 2);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    body();
    benchmark::ClobberMemory();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double total = double(state.iterations()) * double(bytes_per_pass);
  state.SetBytesProcessed(int64_t(total));
  state.counters["vs_memcpy"] = total / seconds / reference;
}

void BM_memcpy(benchmark::State& state) {
  const size_t n = size_t(state.range(0)) / 4;
  const size_t bytes = n * 3;  // same traffic as a cast: 3n read + 3n written = 6n
  Buffer<char> src(bytes), dst(bytes);
  for (auto _ : state) {
    parallel_copy(dst.data.get(), src.data.get(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(2 * bytes));
}

void BM_cast_rn(benchmark::State& state) {
  const size_t n = size_t(state.range(0)) / 4;
  Buffer<float> in(n);
  Buffer<bf16> out(n);
  for (size_t i = 0; i < n; ++i) in.data[i] = sample(i);
  run_against_memcpy(state, 6 * n,
                     [&] { srkit::cpu::cast_f32_to_bf16_rn(in.data.get(), out.data.get(), n); });
}

void BM_cast_sr(benchmark::State& state) {
  const size_t n = size_t(state.range(0)) / 4;
  Buffer<float> in(n);
  Buffer<bf16> out(n);
  for (size_t i = 0; i < n; ++i) in.data[i] = sample(i);
  uint64_t step = 0;
  run_against_memcpy(state, 6 * n, [&] {
    srkit::cpu::cast_f32_to_bf16_sr(in.data.get(), out.data.get(), n, 1234,
                                    srkit::RngPurpose::kCast, step++, 0);
  });
}

void BM_cast_widen(benchmark::State& state) {
  const size_t n = size_t(state.range(0)) / 4;
  Buffer<bf16> in(n);
  Buffer<float> out(n);
  for (size_t i = 0; i < n; ++i) in.data[i] = srkit::float_to_bf16_rn(sample(i));
  run_against_memcpy(state, 6 * n,
                     [&] { srkit::cpu::cast_bf16_to_f32(in.data.get(), out.data.get(), n); });
}

// Argument: fp32 array size in bytes.
void sizes(benchmark::internal::Benchmark* b) {
  b->RangeMultiplier(4)->Range(int64_t(kMinBytes), int64_t(kMaxBytes))->UseRealTime();
}

BENCHMARK(BM_memcpy)->Apply(sizes);
BENCHMARK(BM_cast_rn)->Apply(sizes);
BENCHMARK(BM_cast_sr)->Apply(sizes);
BENCHMARK(BM_cast_widen)->Apply(sizes);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
