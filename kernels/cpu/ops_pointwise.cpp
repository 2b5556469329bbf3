// Element-wise ops: GELU and the residual add, with the element functions of
// kernels/common/math.h. No reductions, so any split over threads gives the
// same bits.
#include "kernels/common/math.h"
#include "kernels/cpu/ops.h"

namespace srkit::cpu {

template <typename T>
void gelu_forward(T* out, const T* inp, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMinWork)
  for (size_t i = 0; i < n; ++i) out[i] = from_f32<T>(gelu(to_f32(inp[i])));
}

// The write mode as a template argument: with it a run-time flag, grad_base's
// select is a conditional load and GCC left the loop scalar (gelu_backward was
// then 15-20% of a d4 step, 6x gelu_forward).
template <bool kAccumulate, typename T>
void gelu_backward_pass(T* dinp, const T* inp, const T* dout, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMinWork)
  for (size_t i = 0; i < n; ++i) {
    const float d = gelu_grad(to_f32(inp[i])) * to_f32(dout[i]);
    dinp[i] = from_f32<T>(grad_base(dinp[i], kAccumulate) + d);
  }
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
