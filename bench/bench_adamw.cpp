// The fused AdamW step (kernels/cpu/adamw.h) of every precision preset at 1M,
// 16M, 64M and 256M parameters, next to a STREAM triad moving the same bytes.
// bytes_per_second counts the bytes the strategy must move per step
// (adamw_traffic_bytes): reads of grads, m, v, master, kahan and the weights
// (not with an f32 master, whose bf16 weights are write-only) plus writes of
// weights, m, v, master, kahan. The label spells them out per preset. vs_triad
// is that rate over a STREAM triad (a = b + s * c, fp32, 12 bytes/element)
// sized to move the same bytes, timed in the same process just before the
// benchmark, so the ratio tracks noise on a shared machine.
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

#include "kernels/cpu/adamw.h"
#include "lib/precision.h"

namespace {

using srkit::AdamWBuffers;
using srkit::AdamWHyper;
using srkit::AdamWRule;

// Owning byte buffer whose pages are first touched by the threads that use them.
struct Buffer {
  explicit Buffer(size_t bytes) : data(bytes ? new char[bytes] : nullptr), size(bytes) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < bytes; i += 4096) data[i] = 0;
  }
  void* get() const { return size ? data.get() : nullptr; }
  std::unique_ptr<char[]> data;
  size_t size;
};

// splitmix64 of i, as a float in [-1, 1).
float unit(uint64_t i) {
  uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(int32_t(uint32_t(z))) * (1.0f / 2147483648.0f);
}

// Writes value(i) into an f32 or bf16 array of n elements.
template <typename F>
void fill(void* p, srkit::DType t, size_t n, F value) {
  if (!p) return;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    if (t == srkit::DType::kF32) {
      static_cast<float*>(p)[i] = value(i);
    } else {
      static_cast<srkit::bf16*>(p)[i] = srkit::float_to_bf16_rn(value(i));
    }
  }
}

// All arrays of a rule for n parameters, with GPT-2-like magnitudes.
struct State {
  State(const AdamWRule& r, size_t n)
      : b(srkit::adamw_array_bytes(r)),
        w(b.weights * n),
        g(b.grads * n),
        master(b.master * n),
        m(b.m * n),
        v(b.v * n),
        kahan(b.kahan * n) {
    fill(w.get(), r.weights, n, [](size_t i) { return 0.02f * unit(i); });
    fill(g.get(), r.weights, n, [](size_t i) { return 1e-3f * unit(i + (1ull << 40)); });
    fill(m.get(), r.m, n, [](size_t i) { return 1e-4f * unit(i + (2ull << 40)); });
    fill(v.get(), r.v, n, [](size_t i) {
      const float x = 1e-3f * unit(i + (3ull << 40));
      return x * x;
    });
    if (r.master == srkit::MasterKind::kF32) {
      fill(master.get(), srkit::DType::kF32, n, [](size_t i) { return 0.02f * unit(i); });
    }
    // rem16 remainders and Kahan compensations start at zero (Buffer zeroes pages lazily:
    // write them so they are real zeros, not untouched pages).
    if (master.size && r.master == srkit::MasterKind::kRem16)
      std::memset(master.get(), 0, master.size);
    if (kahan.size) std::memset(kahan.get(), 0, kahan.size);
  }
  AdamWBuffers buffers() const {
    return {w.get(), g.get(), master.get(), m.get(), v.get(), kahan.get()};
  }
  srkit::AdamWArrayBytes b;
  Buffer w, g, master, m, v, kahan;
};

void triad(float* a, const float* b, const float* c, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
}

// Bytes/s of a STREAM triad moving `bytes` per pass: median of 5 after a warm-up.
double triad_rate(size_t bytes) {
  const size_t n = bytes / 12;
  Buffer a(4 * n), b(4 * n), c(4 * n);
  float* pa = static_cast<float*>(a.get());
  float* pb = static_cast<float*>(b.get());
  float* pc = static_cast<float*>(c.get());
  std::fill(pb, pb + n, 1.0f);
  std::fill(pc, pc + n, 2.0f);
  triad(pa, pb, pc, n);
  std::vector<double> seconds;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    triad(pa, pb, pc, n);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(seconds.begin(), seconds.begin() + 2, seconds.end());
  return 12.0 * double(n) / seconds[2];
}

// "r:w,g,m,v w:w,m,v" for a rule: the arrays behind adamw_traffic_bytes.
std::string traffic_label(const AdamWRule& r) {
  const srkit::AdamWArrayBytes b = srkit::adamw_array_bytes(r);
  const bool master_f32 = r.master == srkit::MasterKind::kF32;
  std::string reads = master_f32 ? "g" : "w,g";
  std::string writes = "w";
  if (b.master) reads += ",master", writes += ",master";
  reads += ",m,v", writes += ",m,v";
  if (b.kahan) reads += ",kahan", writes += ",kahan";
  return "r:" + reads + " w:" + writes + " " + std::to_string(srkit::adamw_traffic_bytes(r)) +
         "B/param";
}

// Arguments: preset index, parameter count, telemetry (0/1).
void BM_adamw_step(benchmark::State& state) {
  const std::string& name = srkit::strategy_preset_names()[size_t(state.range(0))];
  const AdamWRule rule = srkit::strategy_from_string(name).rule();
  const size_t n = size_t(state.range(1));
  const bool with_telemetry = state.range(2) != 0;
  const size_t bytes = srkit::adamw_traffic_bytes(rule) * n;
  const double reference = triad_rate(bytes);
  State s(rule, n);
  // Two segments, as a model has: matrices decay, gains and biases do not.
  const srkit::ParamSegment segs[] = {{0, n / 2, true}, {n / 2, n - n / 2, false}};
  AdamWHyper h{3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.0f, 0.0f, 1.0f, 1234, 0};
  srkit::AdamWTelemetry tel;
  for (auto _ : state) {
    ++h.step;
    h.bias_correction1 = 1.0f - std::pow(h.beta1, float(h.step));
    h.bias_correction2 = 1.0f - std::pow(h.beta2, float(h.step));
    srkit::cpu::adamw_step(rule, s.buffers(), segs, 2, 0, n, h, with_telemetry ? &tel : nullptr);
    benchmark::ClobberMemory();
  }
  const double total = double(state.iterations()) * double(bytes);
  state.SetBytesProcessed(int64_t(total));
  state.counters["params"] = double(n);
  state.counters["triad_Bps"] = reference;
  // kIsRate divides by elapsed seconds: (total / t) / reference.
  state.counters["vs_triad"] = benchmark::Counter(total / reference, benchmark::Counter::kIsRate);
  state.SetLabel(name + (with_telemetry ? "+telemetry " : " ") + traffic_label(rule));
}

void presets_and_sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {int64_t(1) << 20, int64_t(16) << 20, int64_t(64) << 20, int64_t(256) << 20}) {
    for (size_t p = 0; p < srkit::strategy_preset_names().size(); ++p) b->Args({int64_t(p), n, 0});
  }
  // Telemetry costs arithmetic only (no extra traffic): one size shows how much.
  for (size_t p = 0; p < srkit::strategy_preset_names().size(); ++p) {
    b->Args({int64_t(p), int64_t(64) << 20, 1});
  }
  b->ArgNames({"preset", "n", "tel"})->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_adamw_step)->Apply(presets_and_sizes);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
  std::string presets;
  for (size_t p = 0; p < srkit::strategy_preset_names().size(); ++p) {
    presets += (p ? " " : "") + std::to_string(p) + "=" + srkit::strategy_preset_names()[p];
  }
  benchmark::AddCustomContext("presets", presets);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
