// LayerNorm on the CPU (GPT-2's, eps 1e-5), fp32 statistics per row.
// Shapes, storage types and gradient-write conventions: kernels/cpu/elements.h;
// the CUDA launcher of the same name is kernels/cuda/layernorm.h, the op table
// docs/architecture.md ("Ops").
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/elements.h"

namespace srkit::cpu {

// out = (inp - mean) * rstd * weight + bias per row, eps 1e-5 (GPT-2).
// mean, rstd: [N] fp32 (saved for backward).
template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                       const T* bias, int N, int C);
template <typename T, typename G>
void layernorm_backward(T* dinp, GradWrite dinp_mode, G* dweight, G* dbias, GradWrite param_mode,
                        const T* dout, const T* inp, const T* weight, const float* mean,
                        const float* rstd, int N, int C);

}  // namespace srkit::cpu
