// Round-to-nearest-even fp32 -> bf16 (float_to_bf16_rn) against an independent
// formulation over all 2^32 float bit patterns, hand-picked edge cases, and
// bf16_ulp known answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/common/bf16.h"

namespace srkit {
namespace {

uint16_t rn(uint32_t u) { return float_to_bf16_rn(bits_as_float(u)).bits; }

// The bf16 quantum (spacing of bf16 values) for a float with this biased
// exponent field: bf16 keeps 8 significant bits, and below the normal range the
// spacing stays at that of the smallest normal exponent.
double bf16_quantum(int biased_exponent) {
  return std::ldexp(1.0, std::max(biased_exponent, 1) - 127 - 7);
}

// Reference: scale by the quantum so the kept bits become the integer part
// (exact, a power of two), round with the FPU's round-half-even (nearbyint in
// the default mode), scale back (exact). The result has at most 8 significant
// bits, so narrowing to float is exact, except 2^128, which overflows to Inf as
// IEEE round-to-nearest demands. Integer carries play no part.
uint16_t reference_rn(float x, double quantum) {
  const float y = float(std::nearbyint(double(x) / quantum) * quantum);
  return uint16_t(float_as_bits(y) >> 16);
}

TEST(Bf16Rn, ExhaustiveAgainstReference) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  // One task per (sign, exponent field): 2^23 patterns sharing a quantum.
  constexpr int kTasks = 2 * 256;
  std::vector<uint64_t> mismatches(kTasks, 0);
  std::vector<uint32_t> first_bad(kTasks, 0);
#pragma omp parallel for schedule(dynamic)
  for (int task = 0; task < kTasks; ++task) {
    const uint32_t sign = uint32_t(task >> 8) << 31;
    const int exponent = task & 255;
    const uint32_t base = sign | (uint32_t(exponent) << 23);
    const double q = bf16_quantum(exponent);
    // Inf stays Inf; NaN keeps sign and top payload bits and is made quiet.
    auto expected = [&](uint32_t m) {
      const uint32_t u = base | m;
      return exponent == 255 ? uint16_t(m == 0 ? u >> 16 : (u >> 16) | 0x0040u)
                             : reference_rn(bits_as_float(u), q);
    };
    uint64_t bad = 0;
    if (exponent == 255) {
      for (uint32_t m = 0; m < (1u << 23); ++m) bad += rn(base | m) != expected(m);
    } else {
      for (uint32_t m = 0; m < (1u << 23); ++m) {
        bad += rn(base | m) != reference_rn(bits_as_float(base | m), q);
      }
    }
    mismatches[task] = bad;
    for (uint32_t m = 0; bad != 0 && m < (1u << 23); ++m) {
      if (rn(base | m) != expected(m)) {
        first_bad[task] = base | m;
        break;
      }
    }
  }
  for (int task = 0; task < kTasks; ++task) {
    EXPECT_EQ(mismatches[task], 0u) << "sign " << (task >> 8) << " exponent " << (task & 255)
                                    << ": first mismatch at bits 0x" << std::hex << first_bad[task];
  }
}

struct Case {
  uint32_t in;
  uint16_t out;
  const char* what;
};

TEST(Bf16Rn, HandPicked) {
  const Case cases[] = {
      {0x3f800000u, 0x3f80, "1.0"},
      {0x00000000u, 0x0000, "+0"},
      {0x80000000u, 0x8000, "-0 keeps its sign"},
      {0x3f808000u, 0x3f80, "tie, kept half even: down"},
      {0x3f818000u, 0x3f82, "tie, kept half odd: up to even"},
      {0xbf808000u, 0xbf80, "negative tie, even: toward zero"},
      {0xbf818000u, 0xbf82, "negative tie, odd: away from zero"},
      {0x3f808001u, 0x3f81, "just above a tie"},
      {0x3f817fffu, 0x3f81, "just below a tie"},
      {0x3f7fffffu, 0x3f80, "carry into the exponent"},
      {0x7fc00000u, 0x7fc0, "quiet NaN"},
      {0xffc00001u, 0xffc0, "negative quiet NaN keeps its sign"},
      {0x7f800001u, 0x7fc0, "signalling NaN, payload only in low bits: stays NaN, not Inf"},
      {0xff800001u, 0xffc0, "negative signalling NaN, low payload"},
      {0x7fa00000u, 0x7fe0, "signalling NaN with high payload: made quiet, payload kept"},
      {0x7fffffffu, 0x7fff, "NaN with all payload bits: no carry into the sign"},
      {0x7f800000u, 0x7f80, "+Inf"},
      {0xff800000u, 0xff80, "-Inf"},
      {0x7f7f0000u, 0x7f7f, "largest finite bf16"},
      {0x7f7f7fffu, 0x7f7f, "just below the midpoint above the largest finite"},
      {0x7f7f8000u, 0x7f80, "midpoint above the largest finite (odd): Inf"},
      {0x7f7fffffu, 0x7f80, "FLT_MAX: Inf"},
      {0xff7fffffu, 0xff80, "-FLT_MAX: -Inf"},
      {0x00000001u, 0x0000, "smallest subnormal: to +0"},
      {0x80000001u, 0x8000, "negative smallest subnormal: to -0"},
      {0x00008000u, 0x0000, "subnormal tie, even: down to 0"},
      {0x00018000u, 0x0002, "subnormal tie, odd: up"},
      {0x00008001u, 0x0001, "just above a subnormal tie"},
      {0x00010000u, 0x0001, "smallest bf16 subnormal is exact"},
      {0x007fffffu, 0x0080, "largest subnormal: up to the smallest normal"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(rn(c.in), c.out) << c.what << " (input 0x" << std::hex << c.in << ")";
  }
}

TEST(Bf16Rn, WideningIsExact) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    EXPECT_EQ(float_as_bits(bf16_to_float(bf16{uint16_t(h)})), h << 16);
    if (!float_bits_is_nan(h << 16)) {
      EXPECT_EQ(rn(h << 16), h) << "bf16 0x" << std::hex << h << " must round-trip";
    }
  }
}

TEST(Bf16Ulp, KnownAnswers) {
  const float kMin = std::numeric_limits<float>::min();  // 2^-126
  EXPECT_EQ(bf16_ulp(1.0f), std::ldexp(1.0f, -7));
  EXPECT_EQ(bf16_ulp(1.99f), std::ldexp(1.0f, -7));
  EXPECT_EQ(bf16_ulp(2.0f), std::ldexp(1.0f, -6));
  EXPECT_EQ(bf16_ulp(-3.0f), std::ldexp(1.0f, -6)) << "sign ignored";
  EXPECT_EQ(bf16_ulp(0.1f), std::ldexp(1.0f, -11));  // 0.1 = 1.6 * 2^-4
  EXPECT_EQ(bf16_ulp(65504.0f), std::ldexp(1.0f, 8));
  EXPECT_EQ(bf16_ulp(std::numeric_limits<float>::max()), std::ldexp(1.0f, 120));
  EXPECT_EQ(bf16_ulp(std::ldexp(1.0f, -119)), std::ldexp(1.0f, -126)) << "ulp still normal";
  EXPECT_EQ(bf16_ulp(std::ldexp(1.0f, -120)), std::ldexp(1.0f, -127)) << "ulp subnormal";
  EXPECT_EQ(bf16_ulp(kMin), std::ldexp(1.0f, -133));
  EXPECT_EQ(bf16_ulp(std::ldexp(1.0f, -140)), std::ldexp(1.0f, -133)) << "subnormal x";
  EXPECT_EQ(bf16_ulp(0.0f), std::ldexp(1.0f, -133));
  EXPECT_EQ(bf16_ulp(-0.0f), std::ldexp(1.0f, -133));
}

// Property: the ulp is the gap between the two bf16 neighbours bracketing x,
// for every finite bf16 value (all exponents, both signs).
TEST(Bf16Ulp, EqualsNeighbourGap) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint32_t magnitude = h & 0x7fffu;
    if (magnitude >= 0x7f7fu) continue;  // largest finite (next is Inf), Inf, NaN
    const float lo = bf16_to_float(bf16{uint16_t(h)});
    const float hi = bf16_to_float(bf16{uint16_t(h + 1)});
    // A float strictly inside the gap (low half non-zero) has the same ulp.
    const float inside = bits_as_float((h << 16) | 0x1234u);
    EXPECT_EQ(bf16_ulp(lo), std::fabs(hi - lo)) << "bf16 0x" << std::hex << h;
    EXPECT_EQ(bf16_ulp(inside), std::fabs(hi - lo)) << "bf16 0x" << std::hex << h;
  }
}

}  // namespace
}  // namespace srkit
