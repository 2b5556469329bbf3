// The GPU's approximate transcendental instructions, for kernels that try a
// cheap result first and keep it only when it provably rounds like the exact
// one (kernels/cuda/gelu_fast.cuh, softmax_fast.cuh; docs/architecture.md,
// "Approximate first tries"). Each comes with the relative error its callers budget for:
//   - approx_exp2(a) ~ 2^a:   ex2.approx.ftz.f32, 2 ulp (2^-22) documented through
//                             __expf's bound; budgeted 2^-20;
//   - approx_rcp(d)  ~ 1 / d: rcp.approx.ftz.f32, about 1 ulp; budgeted 2^-21.
// Both flush subnormal inputs and results to zero; callers keep their operands
// and results normal.
//
// In the CPU emulation (SRKIT_CUDA_EMU) the hardware's error cannot be
// reproduced, so each is modelled at its budget: the exact value moved up or
// down (chosen by a hash of the input) by almost the whole budgeted error. A
// margin that does not cover the budget then shows as a wrong result in the
// emulation (tests/gpu/test_approx_tries_gpu.cu), and on a GPU the same tests hold
// the real instructions to it.
//
// rounds_to_one_bf16(v, err): whether v - err and v + err (finite) round to the
// same bf16 (nearest, ties to even); every float between them, the exact
// result included when |exact - v| <= err, then rounds to that bf16 too, since
// rounding is monotone.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/math.h"
#include "kernels/cuda/compat.cuh"

namespace srkit::cuda {

inline constexpr float kApproxExp2RelError = 0x1p-20f;
inline constexpr float kApproxRcpRelError = 0x1p-21f;
// e^x = 2^(x kLog2E) (kernels/common/math.h): the constant and the product with
// it round, 1.7 |x log2 e| units of 2^-24 in the exponent, which a caller's
// budget counts as 1.18 |a| relative in 2^a (ln 2 * 1.7).
// A caller's bound on how far its try may be from the exact expression,
// relative, for a try built on approx_exp2(a): rel + rel_per_exponent * |a|.
struct ApproxMargin {
  float rel, rel_per_exponent;
  __device__ __forceinline__ float at(float a) const { return rel + rel_per_exponent * fabsf(a); }
};
// An absolute allowance for roundings of subnormal results (8 subnormal ulps):
// relative budgets do not cover them.
inline constexpr float kSubnormalSlack = 0x1p-146f;

#if defined(SRKIT_CUDA_EMU)

// +1 or -1 from the input's bits (a multiplicative hash's top bit).
inline double emulated_error_sign(float x) {
  return ((float_as_bits(x) * 0x9e3779b1u) >> 31) != 0u ? 1.0 : -1.0;
}
// The exact value moved by the budget less 2^-23, so that the final rounding to
// float (2^-24) keeps the total within the budget.
// Beyond float's range the result is Inf, as the instructions give (a double
// that does not fit a float must not be converted).
inline float emulated_approx(double exact, float input, float budget) {
  const double v = exact * (1.0 + emulated_error_sign(input) * (double(budget) - 0x1p-23));
  return std::fabs(v) > double(FLT_MAX) ? float(std::copysign(double(INFINITY), v)) : float(v);
}
__device__ __forceinline__ float approx_exp2(float a) {
  return emulated_approx(std::exp2(double(a)), a, kApproxExp2RelError);
}
__device__ __forceinline__ float approx_rcp(float d) {
  return emulated_approx(1.0 / double(d), d, kApproxRcpRelError);
}
__device__ __forceinline__ bool rounds_to_one_bf16(float v, float err) {
  return float_to_bf16_rn(v - err).bits == float_to_bf16_rn(v + err).bits;
}

#else

__device__ __forceinline__ float approx_exp2(float a) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(a));
  return y;
}
__device__ __forceinline__ float approx_rcp(float d) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(d));
  return y;
}
// One conversion instruction rounds both (sm_80 and up); for finite inputs it is
// the same round-to-nearest-even as float_to_bf16_rn.
__device__ __forceinline__ bool rounds_to_one_bf16(float v, float err) {
  uint32_t both;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(both) : "f"(v + err), "f"(v - err));
  return (both >> 16) == (both & 0xffffu);
}

#endif

}  // namespace srkit::cuda
