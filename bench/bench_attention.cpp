// attention_forward / attention_backward (kernels/cpu/attention.cpp, T =
// float and bf16) at the shapes of d4 (C=256, 4 heads) and GPT-2 124M (C=768,
// 12 heads), B=8, T=256, next to raw cblas_sgemm calls that do the same
// products densely: the ceiling for attention's products on this machine.
//
// FLOP counts are the causal products the kernels compute (keys t2 <= t):
// forward = scores q.k and out = att @ v = 2 * 2 * P * hs per (batch, head),
// P = T(T+1)/2 visible pairs; backward = datt, dv, dq and dk = 4 * 2 * P * hs.
// The softmax and its backward (O(P) each) are not counted.
// "raw": per (batch, head), the same products as full T x T matrices
// (scores = Q K^T, out = S V forward; dS = dO V^T, dV = S^T dO, dQ = dS K,
// dK = dS^T Q backward), one single-threaded sgemm per product with the heads
// split over the OpenMP threads, as srkit's own GEMM tiles run. Raw does twice
// the causal FLOP (the upper triangle too) and its rate counts all of them.
// Each iteration runs the raw calls just before the kernel (interleaved, as in
// bench_gemm.cpp); vs_raw = the kernel's causal FLOP/s over raw's dense FLOP/s.
//
// Run with OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "kernels/cpu/attention.h"

namespace {

using srkit::bf16;
using srkit::bench::filled;
using srkit::bench::seconds;

struct Shape {
  const char* name;
  int B, T, C, NH;
  int hs() const { return C / NH; }
  double pairs() const { return double(T) * (T + 1) / 2; }
};

const Shape kShapes[] = {
    {"d4", 8, 256, 256, 4},
    {"124M", 8, 256, 768, 12},
};

double causal_flop(const Shape& s, bool backward) {
  return (backward ? 4 : 2) * 2.0 * s.pairs() * s.hs() * s.B * s.NH;
}
double dense_flop(const Shape& s, bool backward) {
  return (backward ? 4 : 2) * 2.0 * double(s.T) * s.T * s.hs() * s.B * s.NH;
}

// Per-head fp32 matrices of the raw products, [B*NH] x [T x hs] or [T x T].
struct RawArrays {
  explicit RawArrays(const Shape& s)
      : heads(size_t(s.B) * s.NH),
        q(filled<float>(heads * s.T * s.hs(), 1)),
        k(filled<float>(heads * s.T * s.hs(), 2)),
        v(filled<float>(heads * s.T * s.hs(), 3)),
        d(filled<float>(heads * s.T * s.hs(), 4)),
        s_(filled<float>(heads * s.T * s.T, 5)),
        ds(heads * s.T * s.T),
        out(heads * s.T * s.hs()) {}
  size_t heads;
  std::vector<float> q, k, v, d, s_, ds, out;
};

// C[m x n] = A[m x kk] op B, row-major, one thread.
void gemm(bool ta, bool tb, int m, int n, int kk, const float* a, int lda, const float* b, int ldb,
          float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              kk, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}

void raw(const Shape& s, RawArrays& a, bool backward) {
  const int T = s.T, hs = s.hs();
  const size_t th = size_t(T) * hs, tt = size_t(T) * T;
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < int64_t(a.heads); ++h) {
    const float *q = &a.q[h * th], *k = &a.k[h * th], *v = &a.v[h * th], *d = &a.d[h * th];
    float *sc = &a.s_[h * tt], *ds = &a.ds[h * tt], *out = &a.out[h * th];
    if (!backward) {
      gemm(false, true, T, T, hs, q, hs, k, hs, sc, T);     // scores = Q K^T
      gemm(false, false, T, hs, T, sc, T, v, hs, out, hs);  // out = S V
    } else {
      gemm(false, true, T, T, hs, d, hs, v, hs, ds, T);     // dS = dO V^T
      gemm(true, false, T, hs, T, sc, T, d, hs, out, hs);   // dV = S^T dO
      gemm(false, false, T, hs, T, ds, T, k, hs, out, hs);  // dQ = dS K
      gemm(true, false, T, hs, T, ds, T, q, hs, out, hs);   // dK = dS^T Q
    }
  }
}

template <typename T>
void BM_attention(benchmark::State& state, Shape s, bool backward) {
  const size_t rows = size_t(s.B) * s.T;
  const auto inp = filled<T>(rows * 3 * s.C, 1), dout = filled<T>(rows * s.C, 2);
  std::vector<T> out(rows * s.C), att(size_t(s.B) * s.NH * s.T * s.T), dinp(rows * 3 * s.C);
  srkit::cpu::attention_forward(out.data(), att.data(), inp.data(), s.B, s.T, s.C, s.NH);
  auto call = [&] {
    if (backward) {
      srkit::cpu::attention_backward(dinp.data(), srkit::GradWrite::kOverwrite, dout.data(),
                                     inp.data(), att.data(), s.B, s.T, s.C, s.NH);
    } else {
      srkit::cpu::attention_forward(out.data(), att.data(), inp.data(), s.B, s.T, s.C, s.NH);
    }
  };
  RawArrays a(s);
  const int saved = openblas_get_num_threads();
  openblas_set_num_threads(1);  // the heads are the parallelism
  double raw_total = 0.0, total = 0.0;
  for (auto _ : state) {
    raw_total += seconds([&] { raw(s, a, backward); });
    const double t = seconds(call);
    total += t;
    state.SetIterationTime(t);
    benchmark::ClobberMemory();
  }
  openblas_set_num_threads(saved);
  state.counters["FLOP/s"] =
      benchmark::Counter(causal_flop(s, backward), benchmark::Counter::kIsIterationInvariantRate);
  // Causal FLOP/s of the kernel over dense FLOP/s of raw, from the same iterations.
  state.counters["vs_raw"] =
      (causal_flop(s, backward) / total) / (dense_flop(s, backward) / raw_total);
}

}  // namespace

int main(int argc, char** argv) {
  for (const Shape& s : kShapes) {
    const std::string dims = std::string(s.name) + "/B=" + std::to_string(s.B) +
                             ",T=" + std::to_string(s.T) + ",C=" + std::to_string(s.C) +
                             ",NH=" + std::to_string(s.NH);
    for (bool backward : {false, true}) {
      const std::string dir = backward ? "bwd/" : "fwd/";
      benchmark::RegisterBenchmark(("attention_f32/" + dir + dims).c_str(), BM_attention<float>, s,
                                   backward)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("attention_bf16/" + dir + dims).c_str(), BM_attention<bf16>, s,
                                   backward)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  return srkit::bench::run_registered_benchmarks(argc, argv);
}
