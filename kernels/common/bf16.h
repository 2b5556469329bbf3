// bfloat16 storage and the three float -> bf16 casts (round-to-nearest-even,
// stochastic, toward zero). Header-only, host+device: the CPU kernels, the CUDA
// kernels and the tests all call exactly these bodies.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/common/hd.h"

namespace srkit {

// A bf16 value as its 16-bit pattern (sign, 8 exponent bits, 7 mantissa bits).
// Plain struct, not a class with arithmetic: every conversion is explicit.
struct bf16 {
  uint16_t bits;
};
static_assert(sizeof(bf16) == 2, "bf16 must be 2 bytes");

SRKIT_HD uint32_t float_as_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

SRKIT_HD float bits_as_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// Exact: every bf16 is a float with the low 16 bits zero.
SRKIT_HD float bf16_to_float(bf16 h) { return bits_as_float(uint32_t(h.bits) << 16); }

SRKIT_HD bool float_bits_is_nan(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

// NaN keeps its sign and payload's top bits and is forced quiet (bit 6 of the
// bf16 mantissa), as __float2bfloat16_rn does; a signalling NaN whose payload
// lives only in the low 16 bits would otherwise truncate to Inf.
SRKIT_HD bf16 bf16_quiet_nan_from_bits(uint32_t u) { return bf16{uint16_t((u >> 16) | 0x0040u)}; }

// Round to nearest, ties to even. Adding 0x7fff + lsb carries into the kept
// half exactly when the dropped half is above the midpoint, or at it with an odd
// kept half. Overflow past the largest finite bf16 (0x7f7f) carries into the
// exponent and yields Inf; Inf stays Inf (low half is zero); subnormals need no
// special case because bf16 shares float's exponent field.
SRKIT_HD bf16 float_to_bf16_rn(float f) {
  const uint32_t u = float_as_bits(f);
  const uint32_t lsb = (u >> 16) & 1u;
  const uint32_t rounded = (u + 0x7fffu + lsb) >> 16;
  // Both results in 32 bits and one select: the form vectorizers handle best.
  return bf16{uint16_t(float_bits_is_nan(u) ? ((u >> 16) | 0x0040u) : rounded)};
}

// Stochastic rounding with 16 random bits r (only the low 16 are used).
// Adding r to the dropped half carries into the kept half with probability
// (dropped half)/65536 exactly, so for |x| below the largest finite bf16
// E[SR(x)] = x. The result is always one of the two bf16 neighbours of x
// (truncation toward zero, or one ulp further from zero). Exactly representable
// values never move. Top of the range: a finite float above 0x7f7f0000 (the
// largest finite bf16, ~3.39e38) rounds up to +-Inf with probability equal to
// its fraction, like the hardware SR instructions; there the mean is no longer
// preserved. NaN stays a quiet NaN, Inf stays Inf.
SRKIT_HD bf16 float_to_bf16_sr(float f, uint32_t r) {
  const uint32_t u = float_as_bits(f);
  // +-Inf has a zero low half, so adding r < 2^16 never carries: Inf stays Inf
  // without a test of its own.
  const uint32_t rounded = (u + (r & 0xffffu)) >> 16;
  return bf16{uint16_t(float_bits_is_nan(u) ? ((u >> 16) | 0x0040u) : rounded)};
}

// Round toward zero (truncation): the biased reference the audits compare with.
SRKIT_HD bf16 float_to_bf16_rz(float f) {
  const uint32_t u = float_as_bits(f);
  return bf16{uint16_t(float_bits_is_nan(u) ? ((u >> 16) | 0x0040u) : (u >> 16))};
}

// Distance between the two bf16 neighbours that bracket finite x (one bf16 ulp
// at x's magnitude); for subnormals this is 2^-133.
// Selects, not branches, so that loops over it vectorize (sr-audit cast).
SRKIT_HD float bf16_ulp(float x) {
  const uint32_t u = float_as_bits(x) & 0x7f800000u;  // exponent only
  // 2^(e-7): the exponent field minus 7 (bf16 keeps 7 explicit mantissa bits);
  // a float subnormal 2^(e-7) for the lowest 7 binades (e - 7 < -126), and the
  // subnormal spacing 2^-133 for subnormal x (field 0, treated as field 1).
  const uint32_t field = u ? u >> 23 : 1u;
  const uint32_t bits = field <= 7u ? 1u << (16 + field - 1) : u - (7u << 23);
  return bits_as_float(bits);
}

}  // namespace srkit
