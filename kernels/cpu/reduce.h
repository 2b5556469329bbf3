// Reductions on the CPU: the fp64 sum of squares of the global gradient norm.
// Shapes, storage types and gradient-write conventions: kernels/cpu/elements.h;
// the CUDA launcher of the same name is kernels/cuda/reduce.h, the op table
// docs/architecture.md ("Ops").
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/elements.h"

namespace srkit::cpu {

// Sum of squares of x[0..n) in fp64 over fixed 64K-element chunks added in
// order: the same bits for any thread count. Used for the global grad norm.
template <typename T>
double sum_squares(const T* x, size_t n);

}  // namespace srkit::cpu
