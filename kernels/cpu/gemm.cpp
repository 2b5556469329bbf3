// matmul_forward / matmul_backward as tiled products (kernels/cpu/gemm_tiles.h): the
// forward is one product, the backward two (dinp and dweight) run in one
// parallel region, then the dbias column sums.
#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cpu/gemm_tiles.h"

namespace srkit::cpu {
namespace {

void check_shape(const char* op, int N, int C, int OC) {
  if (N <= 0 || C <= 0 || OC <= 0) {
    throw std::invalid_argument(std::string(op) + ": bad shape N=" + std::to_string(N) +
                                " C=" + std::to_string(C) + " OC=" + std::to_string(OC) +
                                " (expected all > 0)");
  }
}

// out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias
template <typename T>
GemmProduct<T> forward_product(T* out, const T* inp, const T* weight, const T* bias, int N, int C,
                               int OC) {
  return {N, OC, C, inp, C, false, weight, C, true, out, OC, bias, false};
}

// dinp[N,C] (+)= dout[N,OC] @ weight[OC,C]; dweight[OC,C] (+)= dout^T @ inp[N,C].
// fp32 dweight with bf16 operands (G = float, T = bf16) is the product's
// unrounded output (GemmProduct::c_f32).
template <typename T, typename G>
std::array<GemmProduct<T>, 2> backward_products(T* dinp, G* dweight, const T* dout, const T* inp,
                                                const T* weight, int N, int C, int OC,
                                                bool accumulate_dinp, bool accumulate_params) {
  std::array<GemmProduct<T>, 2> p = {
      {{N, C, OC, dout, OC, false, weight, C, false, dinp, C, nullptr, accumulate_dinp},
       {OC, C, N, dout, OC, true, inp, C, false, nullptr, C, nullptr, accumulate_params}}};
  if constexpr (std::is_same_v<T, G>) {
    p[1].c = dweight;
  } else {
    p[1].c_f32 = dweight;
  }
  return p;
}

// dst[j] (+)= sum over rows r (in order) of src[r, j], in fp32, rounded once.
// Columns go to threads in fixed chunks, so no sum's order depends on the team.
template <typename T, typename G>
void column_sums(G* dst, const T* src, size_t rows, size_t cols, bool accumulate) {
  constexpr size_t kChunk = 64;
  const size_t chunks = (cols + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (parallel : rows * cols >= kParallelMinWork)
  for (size_t ch = 0; ch < chunks; ++ch) {
    const size_t c0 = ch * kChunk;
    const size_t w = std::min(kChunk, cols - c0);
    float acc[kChunk] = {};
    for (size_t r = 0; r < rows; ++r) {
      const T* s = src + r * cols + c0;
#pragma omp simd
      for (size_t j = 0; j < w; ++j) acc[j] += to_f32(s[j]);
    }
    for (size_t j = 0; j < w; ++j) {
      dst[c0 + j] = from_f32<G>(accumulate ? to_f32(dst[c0 + j]) + acc[j] : acc[j]);
    }
  }
}

}  // namespace

template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC,
                    Workspace& ws) {
  check_shape("matmul_forward", N, C, OC);
  const GemmProduct<T> p = forward_product(out, inp, weight, bias, N, C, OC);
  gemm_tiled(&p, 1, ws);
}

template <typename T, typename G>
void matmul_backward(T* dinp, G* dweight, G* dbias, const T* dout, const T* inp, const T* weight,
                     int N, int C, int OC, Workspace& ws, bool accumulate_dinp,
                     bool accumulate_params) {
  check_shape("matmul_backward", N, C, OC);
  const auto products = backward_products(dinp, dweight, dout, inp, weight, N, C, OC,
                                          accumulate_dinp, accumulate_params);
  gemm_tiled(products.data(), int(products.size()), ws);
  if (dbias) column_sums(dbias, dout, size_t(N), size_t(OC), accumulate_params);
}

template <typename T>
size_t matmul_workspace_floats(int N, int C, int OC, int threads) {
  check_shape("matmul_workspace_floats", N, C, OC);
  const GemmProduct<T> forward = forward_product<T>(nullptr, nullptr, nullptr, nullptr, N, C, OC);
  const auto backward =
      backward_products<T, T>(nullptr, nullptr, nullptr, nullptr, nullptr, N, C, OC, true, true);
  return std::max(gemm_scratch_floats(&forward, 1, threads),
                  gemm_scratch_floats(backward.data(), int(backward.size()), threads));
}

#define SRKIT_INSTANTIATE(T)                                                                    \
  template void matmul_forward<T>(T*, const T*, const T*, const T*, int, int, int, Workspace&); \
  template size_t matmul_workspace_floats<T>(int, int, int, int);
SRKIT_INSTANTIATE(float)
SRKIT_INSTANTIATE(bf16)
#undef SRKIT_INSTANTIATE
#define SRKIT_INSTANTIATE(T, G)                                                                \
  template void matmul_backward<T, G>(T*, G*, G*, const T*, const T*, const T*, int, int, int, \
                                      Workspace&, bool, bool);
SRKIT_INSTANTIATE(float, float)
SRKIT_INSTANTIATE(bf16, bf16)
SRKIT_INSTANTIATE(bf16, float)
#undef SRKIT_INSTANTIATE

}  // namespace srkit::cpu
