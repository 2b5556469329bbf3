// matmul_forward / matmul_backward: one sgemm per product, called outside
// OpenMP regions (OpenBLAS threads it). fp32 arrays go straight to BLAS (beta = 1
// accumulates into the gradients). bf16 arrays are widened into the workspace
// (all operands of a call in one parallel region), multiplied into fp32 scratch,
// and one fused pass adds the bias or the old gradient and rounds once.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/ops.h"

namespace srkit::cpu {
namespace {

// Workspace slots (any op may clobber any slot; these keep one call's buffers apart).
enum Slot : int { kSlotA = 0, kSlotB = 1, kSlotC = 2, kSlotAcc = 3 };

void check_shape(const char* op, int N, int C, int OC) {
  if (N <= 0 || C <= 0 || OC <= 0) {
    throw std::invalid_argument(std::string(op) + ": bad shape N=" + std::to_string(N) +
                                " C=" + std::to_string(C) + " OC=" + std::to_string(OC) +
                                " (expected all > 0)");
  }
}

// out[n,oc] = RN(acc[n,oc] + bias[oc]) (bias may be null); acc may alias out
// when T = float.
template <typename T>
void add_bias_round(T* out, const float* acc, const T* bias, size_t N, size_t OC) {
#pragma omp parallel for schedule(static) if (parallel : N * OC >= kParallelMinWork)
  for (size_t n = 0; n < N; ++n) {
    const float* a = acc + n * OC;
    T* o = out + n * OC;
    if (bias) {
#pragma omp simd
      for (size_t j = 0; j < OC; ++j) o[j] = from_f32<T>(a[j] + to_f32(bias[j]));
    } else {
#pragma omp simd
      for (size_t j = 0; j < OC; ++j) o[j] = from_f32<T>(a[j]);
    }
  }
}

// dst = RN(dst + acc) (or RN(acc) when not accumulating): the bf16
// accumulate-into rule (widen, add in fp32, round once).
void accumulate_round(bf16* dst, const float* acc, size_t n, bool accumulate) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMinWork)
  for (size_t i = 0; i < n; ++i) dst[i] = float_to_bf16_rn(grad_base(dst[i], accumulate) + acc[i]);
}

// dst[j] += sum over rows r (in order) of src[r, j]. Columns go to threads in
// fixed chunks, so no sum's order depends on the team. Orphaned worksharing, as
// widen_for: shares the enclosing region's team, or runs on the calling thread.
template <typename T>
void column_sums_for(T* dst, const float* src, size_t rows, size_t cols, bool accumulate) {
  constexpr size_t kChunk = 64;
  const size_t chunks = (cols + kChunk - 1) / kChunk;
#pragma omp for schedule(static) nowait
  for (size_t ch = 0; ch < chunks; ++ch) {
    const size_t c0 = ch * kChunk;
    const size_t w = std::min(kChunk, cols - c0);
    float acc[kChunk] = {};
    for (size_t r = 0; r < rows; ++r) {
      const float* s = src + r * cols + c0;
#pragma omp simd
      for (size_t j = 0; j < w; ++j) acc[j] += s[j];
    }
    for (size_t j = 0; j < w; ++j)
      dst[c0 + j] = from_f32<T>(grad_base(dst[c0 + j], accumulate) + acc[j]);
  }
}

}  // namespace

template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC,
                    Workspace& ws) {
  check_shape("matmul_forward", N, C, OC);
  const size_t n = size_t(N), c = size_t(C), oc = size_t(OC);
  if constexpr (std::is_same_v<T, float>) {
    sgemm(false, true, N, OC, C, inp, C, weight, C, 0.0f, out, OC);
    if (bias) add_bias_round(out, out, bias, n, oc);
  } else {
    float* x = ws.floats(kSlotA, n * c);
    float* w = ws.floats(kSlotB, oc * c);
    float* acc = ws.floats(kSlotC, n * oc);
#pragma omp parallel if (parallel : (n + oc) * c >= kParallelMinWork)
    {
      widen_for(inp, x, n * c);
      widen_for(weight, w, oc * c);
    }
    sgemm(false, true, N, OC, C, x, C, w, C, 0.0f, acc, OC);
    add_bias_round(out, acc, bias, n, oc);
  }
}

template <typename T>
void matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                     int N, int C, int OC, Workspace& ws, bool accumulate_dinp,
                     bool accumulate_params) {
  check_shape("matmul_backward", N, C, OC);
  const size_t n = size_t(N), c = size_t(C), oc = size_t(OC);
  if constexpr (std::is_same_v<T, float>) {
    const float beta_dinp = accumulate_dinp ? 1.0f : 0.0f;
    const float beta_params = accumulate_params ? 1.0f : 0.0f;
    sgemm(false, false, N, C, OC, dout, OC, weight, C, beta_dinp, dinp, C);   // dinp += dout @ W
    sgemm(true, false, OC, C, N, dout, OC, inp, C, beta_params, dweight, C);  // dW += dout^T @ inp
    if (dbias) {
#pragma omp parallel if (parallel : n * oc >= kParallelMinWork)
      column_sums_for(dbias, dout, n, oc, accumulate_params);
    }
  } else {
    float* g = ws.floats(kSlotA, n * oc);
    float* w = ws.floats(kSlotB, oc * c);
    float* x = ws.floats(kSlotC, n * c);
    float* acc = ws.floats(kSlotAcc, std::max(n, oc) * c);
    // One region: widen the three operands, then (dout complete) the bias sums.
#pragma omp parallel if (parallel : n * oc + oc * c + n * c >= kParallelMinWork)
    {
      widen_for(dout, g, n * oc);
      widen_for(weight, w, oc * c);
      widen_for(inp, x, n * c);
      if (dbias) {
#pragma omp barrier
        column_sums_for(dbias, g, n, oc, accumulate_params);
      }
    }
    sgemm(false, false, N, C, OC, g, OC, w, C, 0.0f, acc, C);
    accumulate_round(dinp, acc, n * c, accumulate_dinp);
    sgemm(true, false, OC, C, N, g, OC, x, C, 0.0f, acc, C);
    accumulate_round(dweight, acc, oc * c, accumulate_params);
  }
}

#define SRKIT_INSTANTIATE(T)                                                                    \
  template void matmul_forward<T>(T*, const T*, const T*, const T*, int, int, int, Workspace&); \
  template void matmul_backward<T>(T*, T*, T*, const T*, const T*, const T*, int, int, int,     \
                                   Workspace&, bool, bool);
SRKIT_INSTANTIATE(float)
SRKIT_INSTANTIATE(bf16)
#undef SRKIT_INSTANTIATE

}  // namespace srkit::cpu
