// Element-wise ops: GELU, residual add, zero fill. No reductions, so any split
// over threads gives the same bits.
#include "kernels/cpu/ops.h"
#include "kernels/cpu/ops_math.h"

namespace srkit::cpu {
namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

}  // namespace

// GPT-2's GELU is 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3). Since
// 0.5 (1 + tanh(u)) = sigmoid(2u), it is x * sigmoid(2u): one vectorizable exp
// instead of a scalar tanhf call.
template <typename T>
void gelu_forward(T* out, const T* inp, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMinWork)
  for (size_t i = 0; i < n; ++i) {
    const float x = to_f32(inp[i]);
    const float u = kGeluScale * (x + kGeluCubic * x * x * x);
    out[i] = from_f32<T>(x * logistic(2.0f * u).s);
  }
}

// d/dx [x s(2u)] = s + 2 x s (1 - s) du/dx, with s (1 - s) from the accurate pair.
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMinWork)
  for (size_t i = 0; i < n; ++i) {
    const float x = to_f32(inp[i]);
    const float u = kGeluScale * (x + kGeluCubic * x * x * x);
    const float du = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
    const Logistic l = logistic(2.0f * u);
    const float grad = l.s + 2.0f * x * (l.s * l.one_minus_s) * du;
    dinp[i] = from_f32<T>(to_f32(dinp[i]) + grad * to_f32(dout[i]));
  }
}

template <typename T>
void residual_forward(T* out, const T* a, const T* b, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMinWork)
  for (size_t i = 0; i < n; ++i) out[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
}

template <typename T>
void residual_backward(T* da, T* db, const T* dout, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMinWork)
  for (size_t i = 0; i < n; ++i) {
    const float g = to_f32(dout[i]);
    da[i] = from_f32<T>(to_f32(da[i]) + g);
    db[i] = from_f32<T>(to_f32(db[i]) + g);
  }
}

template <typename T>
void fill_zero(T* x, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMinWork)
  for (size_t i = 0; i < n; ++i) x[i] = T{};
}

#define SRKIT_INSTANTIATE(T)                                         \
  template void gelu_forward<T>(T*, const T*, size_t);               \
  template void gelu_backward<T>(T*, const T*, const T*, size_t);    \
  template void residual_forward<T>(T*, const T*, const T*, size_t); \
  template void residual_backward<T>(T*, T*, const T*, size_t);      \
  template void fill_zero<T>(T*, size_t);
SRKIT_INSTANTIATE(float)
SRKIT_INSTANTIATE(bf16)
#undef SRKIT_INSTANTIATE

}  // namespace srkit::cpu
