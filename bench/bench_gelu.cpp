// gelu_forward / gelu_backward (kernels/cpu/pointwise.cpp, T = float and
// bf16) on the MLP activations of d4 (B=8, T=256, 4C=1024) and GPT-2 124M
// (4C=3072), under each instruction set the CPU runs (SRKIT_CPU_ISA's paths:
// avx2, and avx512 where present), next to a copy of the same bytes.
//
// Bytes are what the op must move: forward reads inp and writes out; backward
// (overwrite) reads inp and dout and writes dinp. Each iteration times a
// parallel memcpy of that many bytes (the OpenMP threads splitting it, as the
// op splits its elements) just before the op; vs_copy = the op's byte rate over
// the copy's, from the same iterations.
//
// Run with OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/pointwise.h"

namespace {

// The MLP activations GELU runs over: B * T * 4C elements.
struct Activations {
  const char* model;
  size_t n;
};
const Activations kModels[] = {{"d4", size_t(8) * 256 * 1024}, {"124M", size_t(8) * 256 * 3072}};

// dst = src over `bytes`, each OpenMP thread copying one contiguous part.
void parallel_copy(char* dst, const char* src, size_t bytes) {
#pragma omp parallel
  {
    const size_t t = size_t(omp_get_thread_num()), nt = size_t(omp_get_num_threads());
    const size_t lo = bytes * t / nt, hi = bytes * (t + 1) / nt;
    std::memcpy(dst + lo, src + lo, hi - lo);
  }
}

template <typename T>
void BM_gelu(benchmark::State& state, Activations s, bool backward, srkit::cpu::CpuIsa isa) {
  const srkit::cpu::ScopedCpuIsa forced(isa);
  // Activations of unit scale, like a pre-GELU layer output.
  std::vector<T> inp = srkit::bench::filled<T>(s.n, 1), dout = srkit::bench::filled<T>(s.n, 2);
  std::vector<T> out(s.n);
  const size_t bytes = (backward ? 3 : 2) * s.n * sizeof(T);
  std::vector<char> copy_src(bytes, 1), copy_dst(bytes);
  auto call = [&] {
    if (backward) {
      srkit::cpu::gelu_backward(out.data(), srkit::GradWrite::kOverwrite, inp.data(), dout.data(),
                                s.n);
    } else {
      srkit::cpu::gelu_forward(out.data(), inp.data(), s.n);
    }
  };
  double copy_total = 0.0, total = 0.0;
  for (auto _ : state) {
    copy_total +=
        srkit::bench::seconds([&] { parallel_copy(copy_dst.data(), copy_src.data(), bytes); });
    const double t = srkit::bench::seconds(call);
    total += t;
    state.SetIterationTime(t);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
  state.counters["vs_copy"] = copy_total / total;  // same bytes: the ratio of the rates
}

}  // namespace

int main(int argc, char** argv) {
  for (const Activations& s : kModels) {
    for (bool backward : {false, true}) {
      for (srkit::cpu::CpuIsa isa : srkit::cpu::runnable_cpu_isas()) {
        const std::string name = std::string(backward ? "bwd/" : "fwd/") + s.model +
                                 "/n=" + std::to_string(s.n) + "/" + srkit::cpu::cpu_isa_name(isa);
        benchmark::RegisterBenchmark(("gelu_f32/" + name).c_str(), BM_gelu<float>, s, backward, isa)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("gelu_bf16/" + name).c_str(), BM_gelu<srkit::bf16>, s,
                                     backward, isa)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  return srkit::bench::run_registered_benchmarks(argc, argv);
}
