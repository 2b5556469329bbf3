// Element-wise ops: GELU and the residual add, with the element functions of
// kernels/common/math.h. No reductions, so any split over threads gives the
// same bits.
#include "kernels/cpu/pointwise.h"

#include <omp.h>

#include "kernels/common/math.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/isa_target.h"

namespace srkit::cpu {
namespace {

// The element loops, always inlined into a function per instruction set: the
// build's baseline (AVX2) and AVX-512 (kernels/cpu/cpu_isa.h), which GELU's
// polynomial and division run twice as wide on. The bits are the same: each
// element's math is exact IEEE operations without contraction, whatever the
// vector width, and nothing is reduced across elements.
template <typename T>
[[gnu::always_inline]] inline void gelu_forward_loop(T* out, const T* inp, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) out[i] = from_f32<T>(gelu(to_f32(inp[i])));
}

// The write mode as a template argument: with it a run-time flag, grad_base's
// select is a conditional load and GCC left the loop scalar (gelu_backward was
// then 15-20% of a d4 step, 6x gelu_forward).
template <bool kAccumulate, typename T>
[[gnu::always_inline]] inline void gelu_backward_loop(T* dinp, const T* inp, const T* dout,
                                                      size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    const float d = gelu_grad(to_f32(inp[i])) * to_f32(dout[i]);
    dinp[i] = from_f32<T>(grad_base(dinp[i], kAccumulate) + d);
  }
}

template <typename T>
void gelu_forward_avx2(T* out, const T* inp, size_t n) {
  gelu_forward_loop(out, inp, n);
}
template <bool kAccumulate, typename T>
void gelu_backward_avx2(T* dinp, const T* inp, const T* dout, size_t n) {
  gelu_backward_loop<kAccumulate>(dinp, inp, dout, n);
}

SRKIT_AVX512_WARNINGS_BEGIN
template <typename T>
SRKIT_TARGET_AVX512 void gelu_forward_avx512(T* out, const T* inp, size_t n) {
  gelu_forward_loop(out, inp, n);
}
template <bool kAccumulate, typename T>
SRKIT_TARGET_AVX512 void gelu_backward_avx512(T* dinp, const T* inp, const T* dout, size_t n) {
  gelu_backward_loop<kAccumulate>(dinp, inp, dout, n);
}
SRKIT_AVX512_WARNINGS_END

// piece(lo, hi) over [0, n) in one contiguous range per thread (on the calling
// thread below kParallelMinWork). The per-ISA loops run inside the pieces: an
// OpenMP region's body is outlined before inlining and would keep the
// baseline's instructions.
template <typename Piece>
void for_each_thread_range(size_t n, Piece&& piece) {
#pragma omp parallel if (n >= kParallelMinWork)
  {
    const size_t t = size_t(omp_get_thread_num()), nt = size_t(omp_get_num_threads());
    const size_t lo = n * t / nt, hi = n * (t + 1) / nt;
    if (lo < hi) piece(lo, hi);
  }
}

}  // namespace

template <typename T>
void gelu_forward(T* out, const T* inp, size_t n) {
  const bool avx512 = cpu_isa() == CpuIsa::kAvx512;  // outside the team: it may throw
  for_each_thread_range(n, [&](size_t lo, size_t hi) {
    if (avx512) {
      gelu_forward_avx512(out + lo, inp + lo, hi - lo);
    } else {
      gelu_forward_avx2(out + lo, inp + lo, hi - lo);
    }
  });
}

template <bool kAccumulate, typename T>
void gelu_backward_pass(T* dinp, const T* inp, const T* dout, size_t n) {
  const bool avx512 = cpu_isa() == CpuIsa::kAvx512;
  for_each_thread_range(n, [&](size_t lo, size_t hi) {
    if (avx512) {
      gelu_backward_avx512<kAccumulate>(dinp + lo, inp + lo, dout + lo, hi - lo);
    } else {
      gelu_backward_avx2<kAccumulate>(dinp + lo, inp + lo, dout + lo, hi - lo);
    }
  });
}

template <typename T>
void gelu_backward(T* dinp, GradWrite dinp_mode, const T* inp, const T* dout, size_t n) {
  if (dinp_mode == GradWrite::kAccumulate) {
    gelu_backward_pass<true>(dinp, inp, dout, n);
  } else {
    gelu_backward_pass<false>(dinp, inp, dout, n);
  }
}

template <typename T>
void residual_forward(T* out, const T* a, const T* b, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMinWork)
  for (size_t i = 0; i < n; ++i) out[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
}

#define SRKIT_INSTANTIATE(T)                                                 \
  template void gelu_forward<T>(T*, const T*, size_t);                       \
  template void gelu_backward<T>(T*, GradWrite, const T*, const T*, size_t); \
  template void residual_forward<T>(T*, const T*, const T*, size_t);
SRKIT_INSTANTIATE(float)
SRKIT_INSTANTIATE(bf16)
#undef SRKIT_INSTANTIATE

}  // namespace srkit::cpu
