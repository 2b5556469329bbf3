// The flash attention's probabilities tried first with the approximate exp2
// (kernels/cuda/approx_math.cuh), where only their bf16 roundings are used:
// the tensor-core operands P (forward and backward) and dS = P (dP - D)
// (backward). A try is kept only when it provably rounds to the bf16 the exact
// softmax_term (kernels/common/softmax.h, exp_poly) rounds to, so the
// operands, hence every output bit, are what exp_poly alone gives; the
// instructions per score drop from about 30 to 10 (docs/architecture.md,
// "Approximate first tries").
//
// Budget, in units u = 2^-24 (both paths start from the same d = x - max):
//   exact: exp_poly within 2 ulp (4 u);
//   try:   a = d log2(e) (1.18 |a| u, approx_math.cuh), approx_exp2 16 u.
//   So the two differ by at most 20 u + 1.18 |a| u relative; kSoftmaxFastMargin
//   is 28 u + 2 |a| u (1.4x and 1.7x).
//   dS: both sides form p * w from their p (w = dP - D, the same float), so
//   they differ by |w| |p - p'| plus one rounding each (2^-22 |dS| covers both).
// The try is made for |d| <= 87, where e^d and every term stay normal; masked
// scores (-inf) are the caller's to skip, others outside the range take
// exp_poly.
#pragma once

#include <cfloat>
#include <cmath>

#include "kernels/cuda/approx_math.cuh"
#include "kernels/cuda/compat.cuh"

namespace srkit::cuda {

inline constexpr ApproxMargin kSoftmaxFastMargin{28.0f * 0x1p-24f, 2.0f * 0x1p-24f};
inline constexpr float kSoftmaxFastMaxAbs = 87.0f;

// The try of softmax_term(x, max) = e^(x - max) and its bound.
struct SoftmaxTry {
  float p, err;
  bool in_range;
};
__device__ __forceinline__ SoftmaxTry softmax_term_try(float x, float max, ApproxMargin m) {
  const float d = x - max;
  const float a = d * kLog2E;
  const float p = approx_exp2(a);
  return {p, p * m.at(a) + kSubnormalSlack, fabsf(d) <= kSoftmaxFastMaxAbs};
}

// Whether the try of softmax_term(x, max) rounds to the exact bf16; p the try.
__device__ __forceinline__ bool softmax_term_fast(float x, float max, ApproxMargin m, float& p) {
  const SoftmaxTry t = softmax_term_try(x, max, m);
  p = t.p;
  return t.in_range & rounds_to_one_bf16(t.p, t.err);
}

// Whether the tries of p = softmax_term(x, max) and ds = p * w both round to
// the exact bf16s.
__device__ __forceinline__ bool softmax_term_and_product_fast(float x, float max, float w,
                                                              ApproxMargin m, float& p, float& ds) {
  const SoftmaxTry t = softmax_term_try(x, max, m);
  p = t.p;
  ds = t.p * w;
  const float ds_err = fabsf(w) * t.err + fabsf(ds) * 0x1p-22f + kSubnormalSlack;
  return t.in_range & (ds_err <= FLT_MAX) & rounds_to_one_bf16(t.p, t.err) &
         rounds_to_one_bf16(ds, ds_err);
}

}  // namespace srkit::cuda
