// Element access of the two storage types inside CUDA kernels: widen to fp32,
// narrow from fp32 with one round-to-nearest-even (kernels/common/bf16.h), and
// the value a gradient store starts from (GradWrite). The same rules as the
// CPU ops' to_f32 / from_f32 / grad_base (kernels/cpu/ops.h).
#pragma once

#include "kernels/common/bf16.h"
#include "kernels/cuda/compat.cuh"

namespace srkit::cuda {

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(bf16 x) { return bf16_to_float(x); }

template <typename T>
__device__ __forceinline__ T narrow(float x);
template <>
__device__ __forceinline__ float narrow<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 narrow<bf16>(float x) {
  return float_to_bf16_rn(x);
}

// The stored value when accumulating, else 0.
template <typename T>
__device__ __forceinline__ float grad_base(const T& stored, bool accumulate) {
  return accumulate ? widen(stored) : 0.0f;
}

}  // namespace srkit::cuda
