// What every CPU model op shares: the element access of its two storage types
// and the work threshold of its threads. The ops (kernels/cpu/<op>.h, one per
// op family, docs/architecture.md "Ops") are one function per op, each for fp32 and
// bf16 storage (T = float or bf16). Arithmetic and accumulation are fp32;
// bf16 outputs are rounded to nearest even once per output element. The
// backward ops that produce parameter gradients store them as G: T, or fp32
// with bf16 activations (AdamWRule::grads; fp32 gradients are not rounded). Results do
// not depend on the number of OpenMP threads (fixed reduction orders).
//
// Conventions (as llm.c): row-major; N = B*T rows; weights of a linear layer are
// [OC, C] (out = inp @ weight^T + bias). Backward functions store each gradient
// output by its GradWrite (kernels/common/grad_write.h): kAccumulate adds into
// the buffer (d* += ...), kOverwrite replaces it; with it the residual stream's
// gradient sums and gradient accumulation over micro-batches need neither extra
// buffers nor clears. The embedding backward always accumulates.
//
// Ops taking a Workspace use its slots as scratch for the duration of the call:
// any of them may overwrite every slot. Bad shapes or targets throw
// std::invalid_argument naming the op and the offending value.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/grad_write.h"
#include "kernels/cpu/workspace.h"

namespace srkit::cpu {

// Ops whose work (elements touched, or multiply-adds) is below this run on the
// calling thread: waking an OpenMP team costs more than it saves, and far more
// when the cores are shared and the team spins.
inline constexpr size_t kParallelMinWork = size_t(1) << 15;

// Element access for the two storage types: widening is exact; storing rounds to
// nearest even (the one rounding per output element).
inline float to_f32(float x) { return x; }
inline float to_f32(bf16 x) { return bf16_to_float(x); }
// What a gradient store adds its contribution to: the stored value, or zero.
template <typename T>
inline float grad_base(const T& stored, bool accumulate) {
  return accumulate ? to_f32(stored) : 0.0f;
}
template <typename T>
T from_f32(float x);
template <>
inline float from_f32<float>(float x) {
  return x;
}
template <>
inline bf16 from_f32<bf16>(float x) {
  return float_to_bf16_rn(x);
}

}  // namespace srkit::cpu
