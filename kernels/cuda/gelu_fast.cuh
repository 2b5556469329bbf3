// GELU forward and backward for bf16 storage on the GPU, tried first with the
// approximate exp2 and reciprocal (kernels/cuda/approx_math.cuh), about 24
// instructions an element (sm_90 SASS) instead of the exact expression's 85 (under
// --fmad=false the exact exp_poly and the IEEE division dominate; that made the
// bf16 GELU bound by arithmetic, at 0.47 of a copy on an H200). The try is kept
// only when it provably rounds to the bf16 the exact expression
// (kernels/common/math.h) rounds to; otherwise the caller computes the exact
// one. The stored bits are therefore the CPU's, always (docs/architecture.md,
// "Approximate first tries").
//
// The proof, per element: the try returns a float y and a bound E on |y - Y|,
// Y the exact expression's float; if y - E and y + E round to the same bf16,
// so does Y, which lies between them (rounding is monotone). E comes from
// relative-error budgets, in units u = 2^-24 (both paths start from the same
// logit z = gelu_logit(x), so only what follows z differs):
//   exact: exp_poly within 2 ulp (4 u), then 1 + e, the division and the
//          product with e or 1 (3 u): 7 u on s = logistic(z) and on 1 - s.
//   try:   a = z * -log2(e) rounds twice (the constant and the product): an
//          error of 1.7 |a| u in the exponent, 1.18 |a| u relative in 2^a;
//          approx_exp2 16 u, 1 + e 1 u, approx_rcp 8 u, e * s 1 u: 26 u +
//          1.18 |a| u on s and on 1 - s.
//   So s and 1 - s differ between the paths by at most rel(a) = 33 u + 1.18 |a| u;
//   the budget kGeluFastMargin is 46 u + 2 |a| u, 1.4x and 1.7x that.
//   forward:  y = x s, one more rounding on each side (2 u): E = |y| rel(a).
//   backward: d = (s + 2x (s (1 - s)) du) dout and out = base + d: the t = 2x s
//             (1-s) du term carries both factors' error and three roundings per
//             side (2 rel(a) + 6 u), the sum s + t, the product with dout and
//             the add of base one rounding each per side: E = |dout| (|s| + 2|t|)
//             rel(a) + (|d| + |out|) 2^-21.
//   Both add kSubnormalSlack (approx_math.cuh) for the absolute roundings of
//   subnormal results.
// The try is made only for |x| <= kGeluFastMaxAbs (9): there |a| <= 96, so e,
// 1 + e, s and 1 - s stay normal (the instructions' flushing never applies),
// and the exact exp_poly needs no clamp. NaN, Inf and larger |x| take the exact
// path, as does any element whose E is not finite.
//
// Cost of the fallback: with the budgets above, 0.14% of forward and 0.82% of
// backward elements at bf16 N(0, 1) inputs fail the test (measured in the
// emulation, which models the full budget; tests/gpu/test_approx_tries_gpu.cu).
#pragma once

#include <cfloat>
#include <cmath>

#include "kernels/common/math.h"
#include "kernels/cuda/approx_math.cuh"
#include "kernels/cuda/compat.cuh"

namespace srkit::cuda {

// rel(a) for GELU (see above).
inline constexpr ApproxMargin kGeluFastMargin{46.0f * 0x1p-24f, 2.0f * 0x1p-24f};
inline constexpr float kGeluFastMaxAbs = 9.0f;

// The try's logistic: s ~ 1 / (1 + e^-z) and e ~ e^-z = 2^a.
struct GeluFastLogistic {
  float a, e, s;
};
__device__ __forceinline__ GeluFastLogistic gelu_fast_logistic(float x) {
  const float a = gelu_logit(x) * -kLog2E;
  const float e = approx_exp2(a);
  return {a, e, approx_rcp(1.0f + e)};
}

// Whether the try of gelu(x) rounds to the exact bf16; y is the try (to be
// rounded by the caller's store) when it does.
__device__ __forceinline__ bool gelu_fast(float x, ApproxMargin m, float& y) {
  const GeluFastLogistic l = gelu_fast_logistic(x);
  y = x * l.s;
  const float err = fabsf(y) * m.at(l.a) + kSubnormalSlack;
  // & rather than &&: both tests are cheap, and predicates need no branch.
  return (fabsf(x) <= kGeluFastMaxAbs) & rounds_to_one_bf16(y, err);
}

// Whether the try of base + gelu_grad(x) * dout (the exact GeluBackward's
// expression, kernels/cuda/pointwise.cu) rounds to the exact bf16.
__device__ __forceinline__ bool gelu_backward_fast(float x, float dout, float base, ApproxMargin m,
                                                   float& out) {
  const GeluFastLogistic l = gelu_fast_logistic(x);
  const float one_minus_s = l.e * l.s;
  const float t = 2.0f * x * (l.s * one_minus_s) * gelu_logit_half_slope(x);
  const float d = (l.s + t) * dout;
  out = base + d;
  const float err = fabsf(dout) * (fabsf(l.s) + 2.0f * fabsf(t)) * m.at(l.a) +
                    (fabsf(d) + fabsf(out)) * 0x1p-21f + kSubnormalSlack;
  return (fabsf(x) <= kGeluFastMaxAbs) & (err <= FLT_MAX) & rounds_to_one_bf16(out, err);
}

}  // namespace srkit::cuda
