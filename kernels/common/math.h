// Element math shared by the CPU ops and the CUDA kernels (docs/architecture.md, "One
// math, two devices"): written so that GCC vectorizes the CPU loops that call it
// (glibc's expf/tanhf are scalar calls without -ffast-math, which made softmax
// and GELU cost more than the GEMMs around them), host+device and free of libm,
// so both devices get the same bits from the same bodies.
#pragma once

#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/hd.h"

namespace srkit {

// c ? a : b on bit patterns, through masks: a branch (or a float select whose arm
// folds to a constant) in these bodies stops GCC from vectorizing the caller's
// loop under the default -ftrapping-math.
SRKIT_HD uint32_t select_bits(bool c, uint32_t a, uint32_t b) {
  const uint32_t m = 0u - uint32_t(c);
  return (a & m) | (b & ~m);
}

// log2(e) as a float: exp_poly's range reduction, and the CUDA kernels'
// approximate exp2 tries (kernels/cuda/approx_math.cuh).
constexpr float kLog2E = 1.44269504f;

// e^x in fp32, within 2 ulp over the whole range (1.2 measured; tests/test_ops_math.cpp):
// overflow gives +Inf, underflow is gradual down to 0, NaN stays NaN.
// e^x = 2^n * e^r with n = round(x / ln 2) and r = x - n ln 2 (ln 2 in two parts,
// the first exact in few bits so n * ln2_hi is exact), |r| <= ln2 / 2, and e^r
// by its degree-7 Taylor polynomial (truncation < 1e-8 relative). x is first
// clamped to [-104, 88.8] (e^x rounds to 0 below, overflows above), so that
// n lies in [-150, 128]; 2^n is applied as two factors 2^(n/2) that are both
// normal floats, so overflow and gradual underflow happen in the last multiply.
SRKIT_HD float exp_poly(float x) {
  constexpr uint32_t kLoBits = 0xc2d00000u;  // -104.0f
  constexpr uint32_t kHiBits = 0x42b1999au;  // 88.8f
  const uint32_t u = float_as_bits(x);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;            // NaN is not clamped: it propagates
  uint32_t uc = select_bits(!nan && u > kLoBits, kLoBits, u);  // x < -104
  uc = select_bits(!nan && u > kHiBits && u < 0x80000000u, kHiBits, uc);  // x > 88.8
  const float xc = bits_as_float(uc);
  // Adding 1.5 * 2^23 rounds to an integer, which then sits in the low mantissa
  // bits: n as a float and as an int32 without a float -> int conversion.
  const float kRound = 12582912.0f;
  const float k = xc * kLog2E + kRound;
  const float n = k - kRound;
  const int32_t ni = int32_t(float_as_bits(k) - float_as_bits(kRound));
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t n1 = ni / 2, n2 = ni - n1;
  const float s1 = bits_as_float(uint32_t(n1 + 127) << 23);
  const float s2 = bits_as_float(uint32_t(n2 + 127) << 23);
  return (p * s1) * s2;
}

// The logistic function s = 1 / (1 + e^-z) and 1 - s, both with their relative
// accuracy on either tail (down into the denormals): with e = e^-|z|, the pair
// is (1, e) / (1 + e) for z >= 0 and (e, 1) / (1 + e) for z < 0.
struct Logistic {
  float s, one_minus_s;
};
SRKIT_HD Logistic logistic(float z) {
  const uint32_t zb = float_as_bits(z);
  const bool neg = (zb >> 31) != 0u;  // z < 0 (or -0, or a negative NaN: same results)
  const float e = exp_poly(bits_as_float(zb | 0x80000000u));  // e^-|z|
  const float inv = 1.0f / (1.0f + e);
  const uint32_t one = 0x3f800000u, eb = float_as_bits(e);
  return {bits_as_float(select_bits(neg, eb, one)) * inv,
          bits_as_float(select_bits(neg, one, eb)) * inv};
}

// GPT-2's GELU, tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x +
// 0.044715 x^3). Since 0.5 (1 + tanh(u)) = sigmoid(2u), it is x * sigmoid(2u):
// one vectorizable exp instead of a scalar tanhf call.
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

// The logistic's argument 2u and du/dx, one body for every caller, so that the
// CUDA GELU's approximate first try (kernels/cuda/gelu_fast.cuh) starts from the
// same bits as the exact expressions below.
SRKIT_HD float gelu_logit(float x) { return 2.0f * (kGeluScale * (x + kGeluCubic * x * x * x)); }
SRKIT_HD float gelu_logit_half_slope(float x) {
  return kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
}

SRKIT_HD float gelu(float x) { return x * logistic(gelu_logit(x)).s; }

// d/dx [x s(2u)] = s + 2 x s (1 - s) du/dx, with s (1 - s) from the accurate pair.
SRKIT_HD float gelu_grad(float x) {
  const float du = gelu_logit_half_slope(x);
  const Logistic l = logistic(gelu_logit(x));
  return l.s + 2.0f * x * (l.s * l.one_minus_s) * du;
}

// GPT-2's LayerNorm epsilon: the CPU and CUDA LayerNorm kernels, and the
// layer_norm_epsilon a Hugging Face export declares (lib/checkpoint/hf_gpt2_config.h).
constexpr float kLayerNormEps = 1e-5f;

}  // namespace srkit
