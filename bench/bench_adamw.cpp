// The fused AdamW step (kernels/cpu/adamw.h) of every precision preset at 1M,
// 16M, 64M and 256M parameters, next to a STREAM triad of the same footprint.
// bytes_per_second counts the bytes the strategy must move per step
// (adamw_traffic_bytes): reads of grads, m, v, master, kahan and the weights
// (not with an f32 master, whose bf16 weights are write-only) plus writes of
// weights, m, v, master, kahan. The label spells them out per preset. The
// triad (a = b + 3 c, fp32, 12 bytes/element as STREAM counts them) runs over
// arrays as large as the strategy's (bytes_per_param x n), one pass after every
// step, and vs_triad is the step's byte rate over the triad's.
// Run with OMP_NUM_THREADS=2 (the figures in BENCHMARKS.md).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <new>
#include <string>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/host_alloc.h"
#include "lib/precision.h"

namespace {

using srkit::AdamWBuffers;
using srkit::AdamWHyper;
using srkit::AdamWRule;

// Owning zeroed byte buffer, allocated as the CPU backend allocates tensors
// (kernels/cpu/host_alloc.h): with plain mmap'd blocks the four 128 MiB bf16
// arrays of the 64M rows shared L1 sets and way hashes on AMD Zen, and the
// step ran at half speed.
struct Buffer {
  explicit Buffer(size_t bytes) : data(bytes ? srkit::cpu::host_alloc(bytes) : nullptr) {
    if (bytes && !data) throw std::bad_alloc();
  }
  void* get() const { return data.get(); }
  struct Free {
    void operator()(void* p) const { srkit::cpu::host_free(p); }
  };
  std::unique_ptr<void, Free> data;
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
    fill(g.get(), r.grads, n, [](size_t i) { return 1e-3f * unit(i + (1ull << 40)); });
    fill(m.get(), r.m, n, [](size_t i) { return 1e-4f * unit(i + (2ull << 40)); });
    fill(v.get(), r.v, n, [](size_t i) {
      const float x = 1e-3f * unit(i + (3ull << 40));
      return x * x;
    });
    if (r.master == srkit::MasterKind::kF32) {
      fill(master.get(), srkit::DType::kF32, n, [](size_t i) { return 0.02f * unit(i); });
    }
    // rem16 remainders and Kahan compensations start at zero, as Buffer leaves them.
  }
  AdamWBuffers buffers() const {
    return {w.get(), g.get(), master.get(), m.get(), v.get(), kahan.get()};
  }
  srkit::AdamWArrayBytes b;
  Buffer w, g, master, m, v, kahan;
};

// STREAM triad a = b + 3 c over fp32 arrays of n elements: 12n bytes a pass.
struct Triad {
  explicit Triad(size_t n) : n(n), a(4 * n), b(4 * n), c(4 * n) {
    float* pb = static_cast<float*>(b.get());
    float* pc = static_cast<float*>(c.get());
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) pb[i] = 1.0f, pc[i] = 2.0f;
  }
  void pass() {
    float* pa = static_cast<float*>(a.get());
    const float* pb = static_cast<const float*>(b.get());
    const float* pc = static_cast<const float*>(c.get());
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) pa[i] = pb[i] + 3.0f * pc[i];
  }
  size_t n;
  Buffer a, b, c;
};

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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Arguments: preset index, parameter count, telemetry (0/1). Every iteration
// times one step and then one triad pass over arrays of the strategy's
// footprint (bytes_per_param x n, so both fit in or spill from the caches
// alike); vs_triad is the ratio of their byte rates over the same iterations,
// which holds steady while load from other processes drifts.
void BM_adamw_step(benchmark::State& state) {
  const std::string& name = srkit::strategy_preset_names()[size_t(state.range(0))];
  const AdamWRule rule = srkit::strategy_from_string(name).rule;
  const size_t n = size_t(state.range(1));
  const bool with_telemetry = state.range(2) != 0;
  const size_t bytes = srkit::adamw_traffic_bytes(rule) * n;
  Triad triad(srkit::adamw_array_bytes(rule).total() * n / 12);
  State s(rule, n);
  // Two segments, as a model has: matrices decay, gains and biases do not.
  const srkit::ParamSegment segs[] = {{0, n / 2, true}, {n / 2, n - n / 2, false}};
  AdamWHyper h{3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.0f, 0.0f, 1.0f, 1234, 0};
  srkit::AdamWTelemetry tel;
  double step_seconds = 0, triad_seconds = 0;
  for (auto _ : state) {
    ++h.step;
    h.bias_correction1 = 1.0f - std::pow(h.beta1, float(h.step));
    h.bias_correction2 = 1.0f - std::pow(h.beta2, float(h.step));
    const auto t0 = std::chrono::steady_clock::now();
    srkit::cpu::adamw_step(rule, s.buffers(), segs, 2, 0, n, h, with_telemetry ? &tel : nullptr);
    const double step = seconds_since(t0);
    const auto t1 = std::chrono::steady_clock::now();
    triad.pass();
    triad_seconds += seconds_since(t1);
    step_seconds += step;
    state.SetIterationTime(step);
  }
  const double iters = double(state.iterations());
  const double step_rate = iters * double(bytes) / step_seconds;
  const double triad_rate = iters * 12.0 * double(triad.n) / triad_seconds;
  state.SetBytesProcessed(int64_t(iters * double(bytes)));
  state.counters["params"] = double(n);
  state.counters["triad_Bps"] = triad_rate;
  state.counters["vs_triad"] = step_rate / triad_rate;
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
  b->ArgNames({"preset", "n", "tel"})->UseManualTime()->Unit(benchmark::kMillisecond);
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
