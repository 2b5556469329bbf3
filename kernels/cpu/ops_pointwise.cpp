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

template <typename T>
void gelu_backward(T* dinp, GradWrite dinp_mode, const T* inp, const T* dout, size_t n) {
  const bool acc = dinp_mode == GradWrite::kAccumulate;
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMinWork)
  for (size_t i = 0; i < n; ++i) {
    const float d = gelu_grad(to_f32(inp[i])) * to_f32(dout[i]);
    dinp[i] = from_f32<T>(grad_base(dinp[i], acc) + d);
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
