// matmul_forward / matmul_backward (T = float and bf16; tiled, kernels/cpu/gemm_tiles.h)
// next to raw cblas_sgemm calls of the same shapes, at the shapes of d4 and GPT-2
// 124M at B=8, T=256 (N = 2048 rows).
//
// bf16 runs once per bf16 GEMM path the CPU has (kernels/cpu/gemm_bf16_path.h):
// matmul_bf16_sgemm widens tiles to fp32 for sgemm, matmul_bf16_avx512bf16
// multiplies bf16 pairs with VDPBF16PS.
//
// FLOP counts: forward = one GEMM = 2*N*C*OC. Backward = two GEMMs (dinp =
// dout @ W and dW = dout^T @ inp) = 4*N*C*OC; the dbias column sum is O(N*OC)
// and not counted. (Forward + backward = 3 GEMMs' worth per linear layer.)
// "raw" is the same sgemm call(s) on fp32 arrays with nothing around them, one
// call per product threaded by OpenBLAS itself: the ceiling for the wrappers.
// Each wrapper iteration also runs the raw call(s) just before it (untimed for
// the wrapper's figures, which use manual timing), and vs_raw = total raw time
// / total wrapper time: interleaving call by call keeps the ratio steady on a
// shared, noisy machine.
//
// Run with OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive OPENBLAS_THREAD_TIMEOUT=4
// (the figures in BENCHMARKS.md). Interleaving needs each side's idle threads
// to sleep at once: OpenBLAS's workers otherwise spin for up to 2^28 cycles
// (~0.1 s) after every raw call, on the cores the tiled wrapper runs on next,
// which measured 0.5-0.75 of raw for wrappers that reach 0.95 without them;
// libgomp's spinning workers would do the same to the raw calls.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16_path.h"

namespace {

using srkit::bf16;
using srkit::bench::filled;
using srkit::bench::seconds;
using srkit::cpu::Workspace;

struct Shape {
  const char* name;
  int N, C, OC;
};

// d4 (C=256, 4 heads, byte vocabulary) and GPT-2 124M (C=768, Vp=50304), B*T = 8*256.
const Shape kShapes[] = {
    {"d4.attproj+lmhead", 2048, 256, 256},
    {"d4.qkv", 2048, 256, 768},
    {"d4.fc", 2048, 256, 1024},
    {"d4.fcproj", 2048, 1024, 256},
    {"124M.attproj", 2048, 768, 768},
    {"124M.qkv", 2048, 768, 2304},
    {"124M.fc", 2048, 768, 3072},
    {"124M.fcproj", 2048, 3072, 768},
    {"124M.lmhead", 2048, 768, 50304},
};

double gemm_flop(const Shape& s) { return 2.0 * s.N * s.C * s.OC; }

// The raw calls: forward out = inp @ W^T; backward dinp += dout @ W, dW += dout^T @ inp.
struct RawArrays {
  explicit RawArrays(const Shape& s)
      : inp(filled<float>(size_t(s.N) * s.C, 1)),
        w(filled<float>(size_t(s.OC) * s.C, 2)),
        out(size_t(s.N) * s.OC),
        dout(filled<float>(size_t(s.N) * s.OC, 3)),
        dinp(size_t(s.N) * s.C),
        dw(size_t(s.OC) * s.C) {}
  std::vector<float> inp, w, out, dout, dinp, dw;
};

void raw_forward(const Shape& s, RawArrays& a) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.N, s.OC, s.C, 1.0f, a.inp.data(), s.C,
              a.w.data(), s.C, 0.0f, a.out.data(), s.OC);
}

void raw_backward(const Shape& s, RawArrays& a) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.N, s.C, s.OC, 1.0f, a.dout.data(), s.OC,
              a.w.data(), s.C, 1.0f, a.dinp.data(), s.C);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s.OC, s.C, s.N, 1.0f, a.dout.data(), s.OC,
              a.inp.data(), s.C, 1.0f, a.dw.data(), s.C);
}

void set_flops(benchmark::State& state, double flop) {
  state.counters["FLOP/s"] =
      benchmark::Counter(flop, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_raw(benchmark::State& state, Shape s, bool backward) {
  RawArrays a(s);
  for (auto _ : state) {
    if (backward) {
      raw_backward(s, a);
    } else {
      raw_forward(s, a);
    }
    benchmark::ClobberMemory();
  }
  set_flops(state, (backward ? 2 : 1) * gemm_flop(s));
}

template <typename T>
void BM_matmul(benchmark::State& state, Shape s, bool backward, srkit::cpu::Bf16GemmPath path) {
  const srkit::cpu::ScopedBf16GemmPath forced(path);
  const auto inp = filled<T>(size_t(s.N) * s.C, 1), w = filled<T>(size_t(s.OC) * s.C, 2),
             bias = filled<T>(size_t(s.OC), 4), dout = filled<T>(size_t(s.N) * s.OC, 3);
  std::vector<T> out(size_t(s.N) * s.OC), dinp(size_t(s.N) * s.C), dw(size_t(s.OC) * s.C),
      dbias(size_t(s.OC));
  Workspace ws;
  auto call = [&] {
    if (backward) {
      srkit::cpu::matmul_backward(dinp.data(), dw.data(), dbias.data(), dout.data(), inp.data(),
                                  w.data(), s.N, s.C, s.OC, ws);
    } else {
      srkit::cpu::matmul_forward(out.data(), inp.data(), w.data(), bias.data(), s.N, s.C, s.OC, ws);
    }
  };
  RawArrays raw(s);
  auto raw_call = [&] { backward ? raw_backward(s, raw) : raw_forward(s, raw); };
  call();  // grows the workspace outside the timed loop
  raw_call();
  double raw_total = 0.0, total = 0.0;
  for (auto _ : state) {
    raw_total += seconds(raw_call);
    const double t = seconds(call);
    total += t;
    state.SetIterationTime(t);
    benchmark::ClobberMemory();
  }
  set_flops(state, (backward ? 2 : 1) * gemm_flop(s));
  state.counters["vs_raw"] = raw_total / total;
}

}  // namespace

int main(int argc, char** argv) {
  for (const char* var : {"OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT"}) {
    if (std::getenv(var) == nullptr) {
      std::fprintf(stderr,
                   "bench_gemm: %s is not set: spinning idle threads of one side slow the other "
                   "(see the header of bench/bench_gemm.cpp)\n",
                   var);
    }
  }
  // 0.25 s per benchmark keeps the whole run near a minute (the wrapper
  // benchmarks also run their raw twins); --benchmark_min_time overrides it.
  constexpr double kMinTime = 0.25;
  const auto bf16_paths = srkit::cpu::runnable_bf16_gemm_paths();
  for (const Shape& s : kShapes) {
    const std::string dims = std::string(s.name) + "/N=" + std::to_string(s.N) +
                             ",C=" + std::to_string(s.C) + ",OC=" + std::to_string(s.OC);
    for (bool backward : {false, true}) {
      const std::string dir = backward ? "bwd/" : "fwd/";
      benchmark::RegisterBenchmark(("raw_sgemm/" + dir + dims).c_str(), BM_raw, s, backward)
          ->UseRealTime()
          ->MinTime(kMinTime)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("matmul_f32/" + dir + dims).c_str(), BM_matmul<float>, s,
                                   backward, srkit::cpu::Bf16GemmPath::kSgemm)
          ->UseManualTime()
          ->MinTime(kMinTime)
          ->Unit(benchmark::kMillisecond);
      for (auto path : bf16_paths) {
        const std::string name =
            std::string("matmul_bf16_") + srkit::cpu::bf16_gemm_path_name(path) + "/" + dir + dims;
        benchmark::RegisterBenchmark(name.c_str(), BM_matmul<bf16>, s, backward, path)
            ->UseManualTime()
            ->MinTime(kMinTime)
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  return srkit::bench::run_registered_benchmarks(argc, argv);
}
