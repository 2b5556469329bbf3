// Narrow floating-point formats beside bf16: IEEE half (fp16) and the OCP 8-bit
// formats fp8 e4m3 and fp8 e5m2, each with the three float -> format casts
// srkit audits (round-to-nearest-even, stochastic, toward zero), decode to
// float and the ulp at a value. Header-only, host+device, integer arithmetic
// only, so the CPU audits and CUDA kernels produce the same bits.
//
// Specials (the choices are the rounding rule's, not the hardware's):
// - fp16 and e5m2 are IEEE-like: +-Inf exist. Under RN a finite float at or
//   above max + ulp/2 becomes Inf (the tie goes to the even code, which is
//   Inf's); RZ never leaves the finite range; SR rounds a value between max
//   and the next power of two up to Inf with probability equal to its fraction,
//   as float_to_bf16_sr does.
// - e4m3 (OCP E4M3FN) has no Inf and one NaN per sign (S.1111.111). Every
//   mode saturates: finite values beyond 448 and +-Inf become +-448, exactly
//   PTX's cvt.*.satfinite.e4m3x2.f32, so CUDA code may use the hardware cast.
//   Saturation means SR is not unbiased above 448 (it is below).
// - NaN becomes the format's quiet NaN with the input's sign (payload dropped).
//
// The SR random bits: only the low 16 bits of r (one lane of the contract,
// sr_bits16) are used. They are added to the top 16 of the bits dropped by the
// cast; a carry out of those 16 bits rounds away from zero. So
//   P(up) = floor(f * 2^16) / 2^16   for the fraction f of x between neighbours.
// fp16 normals drop 13 bits (< 16), so P(up) = f exactly; fp8 targets drop 20
// (e4m3) or 21 (e5m2) bits and the subnormal ranges drop more: the dropped bits
// below the top 16 are ignored, biasing the result toward zero by less than
// 2^-16 ulp, far below the sampling noise of any audit.
#pragma once

#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/hd.h"

namespace srkit {

struct fp16 {
  uint16_t bits;
};
struct fp8_e4m3 {
  uint8_t bits;
};
struct fp8_e5m2 {
  uint8_t bits;
};

enum class RoundMode : int { kRN = 0, kSR = 1, kRZ = 2 };

// Per-format constants; codes are magnitudes (sign bit clear).
struct Fp16Traits {
  static constexpr int kMan = 10;    // explicit mantissa bits
  static constexpr int kEmin = -14;  // exponent of the smallest normal (1 - bias)
  static constexpr bool kHasInf = true;
  static constexpr uint32_t kSignBit = 0x8000u;
  static constexpr uint32_t kMaxFinite = 0x7bffu;  // 65504
  static constexpr uint32_t kInfCode = 0x7c00u;
  static constexpr uint32_t kNanCode = 0x7e00u;
};
struct Fp8E5M2Traits {
  static constexpr int kMan = 2;
  static constexpr int kEmin = -14;
  static constexpr bool kHasInf = true;
  static constexpr uint32_t kSignBit = 0x80u;
  static constexpr uint32_t kMaxFinite = 0x7bu;  // 57344
  static constexpr uint32_t kInfCode = 0x7cu;
  static constexpr uint32_t kNanCode = 0x7eu;
};
struct Fp8E4M3Traits {
  static constexpr int kMan = 3;
  static constexpr int kEmin = -6;
  static constexpr bool kHasInf = false;
  static constexpr uint32_t kSignBit = 0x80u;
  static constexpr uint32_t kMaxFinite = 0x7eu;  // 448
  static constexpr uint32_t kInfCode = 0x7eu;    // no Inf: saturates to max
  static constexpr uint32_t kNanCode = 0x7fu;
};

namespace fp_detail {

// |x| (finite, as fp32 bits a) = (code + rem / 2^shift) target units, where
// code is the truncated target magnitude code; f16 = top 16 dropped bits.
struct Split {
  uint32_t code;
  uint64_t rem;
  int shift;
  uint32_t f16;
};

SRKIT_HD Split split(uint32_t a, int man, int emin) {
  const int e32 = int(a >> 23);
  const uint64_t m = e32 ? uint64_t((a & 0x7fffffu) | 0x800000u) : uint64_t(a & 0x7fffffu);
  const int e = e32 ? e32 - 127 : -126;
  // Normal in the target: keep man bits, and the implicit bit in m >> shift
  // lands in the exponent field so base + (m >> shift) is the full code.
  // Subnormal in the target: the unit is 2^(emin - man), shift grows.
  int shift = e >= emin ? 23 - man : 23 - man + (emin - e);
  const uint32_t base = e >= emin ? uint32_t(e - emin) << man : 0u;
  if (shift > 63) shift = 63;  // m < 2^24: nothing survives either way
  Split s;
  s.code = base + uint32_t(m >> shift);
  s.rem = m & ((uint64_t(1) << shift) - 1);
  s.shift = shift;
  s.f16 = shift >= 16 ? uint32_t(s.rem >> (shift - 16)) : uint32_t(s.rem << (16 - shift));
  return s;
}

}  // namespace fp_detail

// The format's bits of x rounded with `mode`; r: SR bits (low 16 used).
template <class F>
SRKIT_HD uint32_t fp_round_bits(float x, RoundMode mode, uint32_t r) {
  const uint32_t u = float_as_bits(x);
  const uint32_t sign = (u >> 31) ? F::kSignBit : 0u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | F::kNanCode;
  if (a == 0x7f800000u) return sign | F::kInfCode;
  const fp_detail::Split s = fp_detail::split(a, F::kMan, F::kEmin);
  bool up = false;
  if (mode == RoundMode::kRN) {
    const uint64_t half = uint64_t(1) << (s.shift - 1);
    up = s.rem > half || (s.rem == half && (s.code & 1u));
  } else if (mode == RoundMode::kSR) {
    up = s.f16 + (r & 0xffffu) >= 0x10000u;
  }
  uint32_t code = s.code + (up ? 1u : 0u);
  if (code > F::kMaxFinite) {
    code = (F::kHasInf && mode != RoundMode::kRZ) ? F::kInfCode : F::kMaxFinite;
  }
  return sign | code;
}

// Exact value of a code (any bits: Inf and NaN decode to float Inf and NaN).
template <class F>
SRKIT_HD float fp_decode(uint32_t bits) {
  const uint32_t sign = (bits & F::kSignBit) ? 0x80000000u : 0u;
  const uint32_t c = bits & (F::kSignBit - 1);
  if (F::kHasInf && c >= F::kInfCode)
    return bits_as_float(sign | (c == F::kInfCode ? 0x7f800000u : 0x7fc00000u));
  if (!F::kHasInf && c == F::kNanCode) return bits_as_float(sign | 0x7fc00000u);
  const uint32_t ef = c >> F::kMan;
  const uint32_t mant = c & ((1u << F::kMan) - 1);
  float mag;
  if (ef == 0) {  // subnormal: mant units of 2^(emin - man), exact in float
    mag = float(mant) * bits_as_float(uint32_t(127 + F::kEmin - F::kMan) << 23);
  } else {
    mag = bits_as_float((uint32_t(int(ef) - 1 + F::kEmin + 127) << 23) | (mant << (23 - F::kMan)));
  }
  return bits_as_float(float_as_bits(mag) | sign);
}

// Distance between the two format neighbours that bracket finite x.
template <class F>
SRKIT_HD float fp_ulp(float x) {
  const uint32_t a = float_as_bits(x) & 0x7fffffffu;
  int e = (a >> 23) ? int(a >> 23) - 127 : -126;
  if (e < F::kEmin) e = F::kEmin;
  return bits_as_float(uint32_t(e - F::kMan + 127) << 23);
}

// Named casts, in the style of bf16.h.
SRKIT_HD fp16 float_to_fp16_rn(float x) {
  return fp16{uint16_t(fp_round_bits<Fp16Traits>(x, RoundMode::kRN, 0))};
}
SRKIT_HD fp16 float_to_fp16_sr(float x, uint32_t r) {
  return fp16{uint16_t(fp_round_bits<Fp16Traits>(x, RoundMode::kSR, r))};
}
SRKIT_HD fp16 float_to_fp16_rz(float x) {
  return fp16{uint16_t(fp_round_bits<Fp16Traits>(x, RoundMode::kRZ, 0))};
}
SRKIT_HD float fp16_to_float(fp16 h) { return fp_decode<Fp16Traits>(h.bits); }
SRKIT_HD float fp16_ulp(float x) { return fp_ulp<Fp16Traits>(x); }

SRKIT_HD fp8_e4m3 float_to_e4m3_rn(float x) {
  return fp8_e4m3{uint8_t(fp_round_bits<Fp8E4M3Traits>(x, RoundMode::kRN, 0))};
}
SRKIT_HD fp8_e4m3 float_to_e4m3_sr(float x, uint32_t r) {
  return fp8_e4m3{uint8_t(fp_round_bits<Fp8E4M3Traits>(x, RoundMode::kSR, r))};
}
SRKIT_HD fp8_e4m3 float_to_e4m3_rz(float x) {
  return fp8_e4m3{uint8_t(fp_round_bits<Fp8E4M3Traits>(x, RoundMode::kRZ, 0))};
}
SRKIT_HD float e4m3_to_float(fp8_e4m3 h) { return fp_decode<Fp8E4M3Traits>(h.bits); }
SRKIT_HD float e4m3_ulp(float x) { return fp_ulp<Fp8E4M3Traits>(x); }

SRKIT_HD fp8_e5m2 float_to_e5m2_rn(float x) {
  return fp8_e5m2{uint8_t(fp_round_bits<Fp8E5M2Traits>(x, RoundMode::kRN, 0))};
}
SRKIT_HD fp8_e5m2 float_to_e5m2_sr(float x, uint32_t r) {
  return fp8_e5m2{uint8_t(fp_round_bits<Fp8E5M2Traits>(x, RoundMode::kSR, r))};
}
SRKIT_HD fp8_e5m2 float_to_e5m2_rz(float x) {
  return fp8_e5m2{uint8_t(fp_round_bits<Fp8E5M2Traits>(x, RoundMode::kRZ, 0))};
}
SRKIT_HD float e5m2_to_float(fp8_e5m2 h) { return fp_decode<Fp8E5M2Traits>(h.bits); }
SRKIT_HD float e5m2_ulp(float x) { return fp_ulp<Fp8E5M2Traits>(x); }

// Run-time choice of format, for audits that loop over all of them. bf16 goes
// through bf16.h's casts (the ones training uses).
enum class FpFormat : int { kBf16 = 0, kFp16 = 1, kE4M3 = 2, kE5M2 = 3 };
constexpr int kFpFormatCount = 4;

SRKIT_HD const char* fp_format_name(FpFormat f) {
  switch (f) {
    case FpFormat::kBf16:
      return "bf16";
    case FpFormat::kFp16:
      return "fp16";
    case FpFormat::kE4M3:
      return "e4m3";
    default:
      return "e5m2";
  }
}

SRKIT_HD const char* round_mode_name(RoundMode m) {
  return m == RoundMode::kRN ? "RN" : (m == RoundMode::kSR ? "SR" : "RZ");
}

// x rounded to format f with mode m, returned as its (exact) float value.
SRKIT_HD float fp_round(FpFormat f, RoundMode m, float x, uint32_t r) {
  switch (f) {
    case FpFormat::kBf16: {
      const bf16 q = m == RoundMode::kRN   ? float_to_bf16_rn(x)
                     : m == RoundMode::kSR ? float_to_bf16_sr(x, r)
                                           : float_to_bf16_rz(x);
      return bf16_to_float(q);
    }
    case FpFormat::kFp16:
      return fp_decode<Fp16Traits>(fp_round_bits<Fp16Traits>(x, m, r));
    case FpFormat::kE4M3:
      return fp_decode<Fp8E4M3Traits>(fp_round_bits<Fp8E4M3Traits>(x, m, r));
    default:
      return fp_decode<Fp8E5M2Traits>(fp_round_bits<Fp8E5M2Traits>(x, m, r));
  }
}

SRKIT_HD float fp_format_ulp(FpFormat f, float x) {
  switch (f) {
    case FpFormat::kBf16:
      return bf16_ulp(x);
    case FpFormat::kFp16:
      return fp16_ulp(x);
    case FpFormat::kE4M3:
      return e4m3_ulp(x);
    default:
      return e5m2_ulp(x);
  }
}

// Largest finite value of the format.
SRKIT_HD float fp_format_max(FpFormat f) {
  switch (f) {
    case FpFormat::kBf16:
      return bits_as_float(0x7f7f0000u);
    case FpFormat::kFp16:
      return 65504.0f;
    case FpFormat::kE4M3:
      return 448.0f;
    default:
      return 57344.0f;
  }
}

// Name lookups without exceptions (host+device); callers report bad names.
namespace fp_detail {
SRKIT_HD bool str_equal(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}
}  // namespace fp_detail

SRKIT_HD bool parse_fp_format(const char* name, FpFormat* out) {
  for (int i = 0; i < kFpFormatCount; ++i) {
    if (fp_detail::str_equal(name, fp_format_name(FpFormat(i)))) {
      *out = FpFormat(i);
      return true;
    }
  }
  return false;
}
SRKIT_HD bool parse_round_mode(const char* name, RoundMode* out) {
  for (int i = 0; i < 3; ++i) {
    if (fp_detail::str_equal(name, round_mode_name(RoundMode(i)))) {
      *out = RoundMode(i);
      return true;
    }
  }
  return false;
}

}  // namespace srkit
