// Element-wise ops on the CPU: GELU and the residual sum.
// Shapes, storage types and gradient-write conventions: kernels/cpu/elements.h;
// the CUDA launcher of the same name is kernels/cuda/pointwise.h, the op table
// docs/architecture.md ("Ops").
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/elements.h"

namespace srkit::cpu {

// GELU, tanh approximation (GPT-2).
template <typename T>
void gelu_forward(T* out, const T* inp, size_t n);
// dinp (+)= dout * gelu'(inp)
template <typename T>
void gelu_backward(T* dinp, GradWrite dinp_mode, const T* inp, const T* dout, size_t n);

template <typename T>
void residual_forward(T* out, const T* a, const T* b, size_t n);

}  // namespace srkit::cpu
