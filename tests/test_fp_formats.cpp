// fp16 / fp8 e4m3 / fp8 e5m2 casts of kernels/common/fp_formats.h against an
// independent reference: every code point decodes to the value its fields say
// (std::ldexp in double), RN and RZ agree with a nearest-neighbour search over
// the sorted table of all finite values on a dense sweep (every neighbour pair
// at exact, tie, tie +- one float ulp and interior fractions; subnormals,
// overflow, specials) and on a strided sweep of all float bit patterns; SR's
// P(up) is checked exactly by running all 2^16 values of the random bits, and
// its unbiasedness statistically with the contract's bits (fixed seeds, 5
// standard errors).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/common/fp_formats.h"
#include "kernels/common/sr_bits.h"

namespace srkit {
namespace {

// The format as its fields, written independently of the traits.
struct Spec {
  const char* name;
  int exp_bits, man_bits, bias;
  bool has_inf;  // IEEE-like all-ones exponent; else only S.1111.111 is NaN
  double max_finite;
};
constexpr Spec kFp16{"fp16", 5, 10, 15, true, 65504.0};
constexpr Spec kE5M2{"e5m2", 5, 2, 15, true, 57344.0};
constexpr Spec kE4M3{"e4m3", 4, 3, 7, false, 448.0};

int code_bits(const Spec& s) { return 1 + s.exp_bits + s.man_bits; }

// Reference decode of a magnitude code; NaN for NaN codes, Inf for Inf.
double ref_decode(const Spec& s, uint32_t c) {
  const uint32_t ef = c >> s.man_bits, mant = c & ((1u << s.man_bits) - 1);
  const uint32_t ones = (1u << s.exp_bits) - 1;
  if (s.has_inf && ef == ones) {
    return mant == 0 ? std::numeric_limits<double>::infinity()
                     : std::numeric_limits<double>::quiet_NaN();
  }
  if (!s.has_inf && ef == ones && mant == (1u << s.man_bits) - 1) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (ef == 0) return std::ldexp(double(mant), 1 - s.bias - s.man_bits);
  return std::ldexp(double(mant + (1u << s.man_bits)), int(ef) - s.bias - s.man_bits);
}

// Finite magnitudes in code order (index = code), plus the value one code past
// the largest finite one (the next binade's start or, for e4m3, 480).
std::vector<double> value_table(const Spec& s) {
  std::vector<double> v;
  for (uint32_t c = 0;; ++c) {
    const double d = ref_decode(s, c);
    if (!std::isfinite(d)) break;
    v.push_back(d);
    if (d == s.max_finite) break;
  }
  const double top = v.back(), gap = top - v[v.size() - 2];
  v.push_back(top + gap);
  return v;
}

uint32_t round_bits(const Spec& s, float x, RoundMode m, uint32_t r) {
  if (s.man_bits == 10) return fp_round_bits<Fp16Traits>(x, m, r);
  if (s.man_bits == 2) return fp_round_bits<Fp8E5M2Traits>(x, m, r);
  return fp_round_bits<Fp8E4M3Traits>(x, m, r);
}
float decode(const Spec& s, uint32_t bits) {
  if (s.man_bits == 10) return fp_decode<Fp16Traits>(bits);
  if (s.man_bits == 2) return fp_decode<Fp8E5M2Traits>(bits);
  return fp_decode<Fp8E4M3Traits>(bits);
}

// Reference RN / RZ of a finite float, as format bits.
uint32_t ref_round(const Spec& s, const std::vector<double>& table, float x, RoundMode m) {
  const uint32_t sign = std::signbit(x) ? 1u << (code_bits(s) - 1) : 0u;
  const double a = std::fabs(double(x));
  const uint32_t max_code = uint32_t(table.size() - 2);
  uint32_t code;
  if (a >= table.back()) {
    code = max_code + 1;
  } else {
    code = uint32_t(std::upper_bound(table.begin(), table.end(), a) - table.begin() - 1);
    if (m == RoundMode::kRN && a != table[code]) {
      const double below = a - table[code], above = table[code + 1] - a;  // exact
      if (above < below || (above == below && (code & 1u))) ++code;
    }
  }
  if (code > max_code) code = (s.has_inf && m == RoundMode::kRN) ? max_code + 1 : max_code;
  return sign | code;
}

// Inputs around every neighbour pair, both signs.
std::vector<float> dense_inputs(const std::vector<double>& table) {
  std::vector<float> xs;
  for (size_t i = 0; i + 1 < table.size(); ++i) {
    const float lo = float(table[i]), hi = float(table[i + 1]);
    const float mid = float((table[i] + table[i + 1]) / 2);  // exact: few bits
    const float pts[] = {lo,
                         std::nextafter(lo, 1e30f),
                         std::nextafter(mid, 0.0f),
                         mid,
                         std::nextafter(mid, 1e30f),
                         std::nextafter(hi, 0.0f),
                         float(table[i] + (table[i + 1] - table[i]) * 0.3),
                         float(table[i] + (table[i + 1] - table[i]) * 0.7)};
    for (float p : pts) {
      xs.push_back(p);
      xs.push_back(-p);
    }
  }
  for (float big : {65536.0f, 1e6f, 3e38f, std::numeric_limits<float>::max(),
                    std::numeric_limits<float>::denorm_min(), 1e-30f, 1e-40f}) {
    xs.push_back(big);
    xs.push_back(-big);
  }
  return xs;
}

class FpFormatTest : public ::testing::TestWithParam<Spec> {};

TEST_P(FpFormatTest, EveryCodePointDecodes) {
  const Spec s = GetParam();
  const uint32_t n = 1u << code_bits(s);
  for (uint32_t bits = 0; bits < n; ++bits) {
    const uint32_t sign_bit = 1u << (code_bits(s) - 1);
    const double ref = ref_decode(s, bits & (sign_bit - 1)) * ((bits & sign_bit) ? -1 : 1);
    const float got = decode(s, bits);
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(got)) << s.name << " 0x" << std::hex << bits;
      continue;
    }
    ASSERT_EQ(double(got), ref) << s.name << " 0x" << std::hex << bits;
    EXPECT_EQ(std::signbit(got), (bits & sign_bit) != 0) << s.name << " 0x" << std::hex << bits;
    // Representable values never move, in any mode and for any random bits.
    for (RoundMode m : {RoundMode::kRN, RoundMode::kRZ, RoundMode::kSR}) {
      EXPECT_EQ(round_bits(s, got, m, 0xffffu), bits) << s.name << " 0x" << std::hex << bits;
    }
  }
}

TEST_P(FpFormatTest, RoundNearestAndTowardZeroMatchReferenceDenseSweep) {
  const Spec s = GetParam();
  const std::vector<double> table = value_table(s);
  for (float x : dense_inputs(table)) {
    for (RoundMode m : {RoundMode::kRN, RoundMode::kRZ}) {
      ASSERT_EQ(round_bits(s, x, m, 0), ref_round(s, table, x, m))
          << s.name << ' ' << round_mode_name(m) << " x=" << x;
    }
  }
}

TEST_P(FpFormatTest, RoundNearestAndTowardZeroMatchReferenceStridedFloats) {
  const Spec s = GetParam();
  const std::vector<double> table = value_table(s);
  for (uint64_t u = 0; u < 0x7f800000u; u += 4099) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float x = bits_as_float(uint32_t(u) | sign);
      for (RoundMode m : {RoundMode::kRN, RoundMode::kRZ}) {
        ASSERT_EQ(round_bits(s, x, m, 0), ref_round(s, table, x, m))
            << s.name << ' ' << round_mode_name(m) << " x bits 0x" << std::hex << float_as_bits(x);
      }
    }
  }
}

TEST_P(FpFormatTest, Specials) {
  const Spec s = GetParam();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (RoundMode m : {RoundMode::kRN, RoundMode::kSR, RoundMode::kRZ}) {
    EXPECT_TRUE(std::isnan(decode(s, round_bits(s, nan, m, 0))));
    EXPECT_TRUE(std::isnan(decode(s, round_bits(s, -nan, m, 0))));
    const float pinf = decode(s, round_bits(s, inf, m, 0));
    const float ninf = decode(s, round_bits(s, -inf, m, 0));
    // e4m3 has no Inf: saturates (PTX satfinite); the others keep Inf.
    EXPECT_EQ(pinf, s.has_inf ? inf : float(s.max_finite)) << s.name;
    EXPECT_EQ(ninf, s.has_inf ? -inf : -float(s.max_finite)) << s.name;
    EXPECT_EQ(round_bits(s, -0.0f, m, 0xffffu), 1u << (code_bits(s) - 1)) << "-0 keeps its sign";
  }
  // Overflow: RZ stays finite; RN goes to Inf from max + ulp/2 up (not for e4m3).
  const float huge = 1e30f;
  EXPECT_EQ(decode(s, round_bits(s, huge, RoundMode::kRZ, 0)), float(s.max_finite));
  EXPECT_EQ(decode(s, round_bits(s, huge, RoundMode::kRN, 0)),
            s.has_inf ? inf : float(s.max_finite));
}

// P(up) = floor(f * 2^16) / 2^16 exactly: over all 2^16 values of r the count of
// results one ulp away from zero is floor(f * 2^16), and every result is one of
// the two neighbours (or saturated / Inf at the top).
TEST_P(FpFormatTest, StochasticRoundingUpCountIsTheFractionOverAllRandomBits) {
  const Spec s = GetParam();
  const std::vector<double> table = value_table(s);
  const uint32_t max_code = uint32_t(table.size() - 2);
  size_t checked = 0;
  const std::vector<float> xs = dense_inputs(table);
  // ~400 inputs: a stride of 16j + 7 visits every kind of point of dense_inputs.
  const size_t stride = 16 * (xs.size() / (16 * 400)) + 7;
  for (size_t k = 0; k < xs.size(); k += stride) {
    const float x = xs[k];
    if (std::fabs(double(x)) >= table.back()) continue;
    const uint32_t rz = round_bits(s, x, RoundMode::kRZ, 0);
    const uint32_t mag = rz & ((1u << (code_bits(s) - 1)) - 1);
    const double lo = table[mag], hi = table[mag + 1];
    const double f = (std::fabs(double(x)) - lo) / (hi - lo);
    const uint64_t expected = uint64_t(std::floor(std::ldexp(f, 16)));
    uint64_t ups = 0;
    for (uint32_t r = 0; r < 65536; ++r) {
      const uint32_t q = round_bits(s, x, RoundMode::kSR, r);
      if (q == rz) continue;
      ++ups;
      const uint32_t want_mag = mag + 1 > max_code && !s.has_inf ? max_code : mag + 1;
      ASSERT_EQ(q, (rz & ~((1u << (code_bits(s) - 1)) - 1)) | want_mag) << s.name << " x=" << x;
    }
    if (mag == max_code && !s.has_inf) continue;  // saturated: never "up"
    ASSERT_EQ(ups, expected) << s.name << " x=" << x << " f=" << f;
    ++checked;
  }
  EXPECT_GT(checked, 100u);
}

// E[SR(x)] = x with the contract's bits: mean error in ulps over 10^6 draws of
// varied inputs is within 5 standard errors of 0; RZ on the same data is far out.
TEST_P(FpFormatTest, StochasticRoundingIsUnbiasedWithContractBits) {
  const Spec s = GetParam();
  constexpr size_t kDraws = 1'000'000;
  double sum_sr = 0, sq_sr = 0, sum_rz = 0;
  for (size_t i = 0; i < kDraws; ++i) {
    const uint32_t h = uint32_t((uint64_t(i) * 0x9E3779B97F4A7C15ull) >> 32);
    // |x| log-uniform over the format's normal range below max, both signs.
    const double span = std::log2(s.max_finite) - (1 - s.bias);
    const double mag = std::exp2((1 - s.bias) + span * double(h & 0xffffff) / 16777216.0);
    const float x = float((h >> 31) ? -mag : mag);
    const uint32_t r = sr_bits16(uint64_t(9), RngPurpose::kCast, 0, i);
    const double u = std::fabs(double(decode(s, round_bits(s, x, RoundMode::kRZ, 0)) - x));
    const double spacing = s.man_bits == 10  ? fp16_ulp(x)
                           : s.man_bits == 2 ? e5m2_ulp(x)
                                             : e4m3_ulp(x);
    const double e_sr =
        (std::fabs(double(decode(s, round_bits(s, x, RoundMode::kSR, r)))) - std::fabs(double(x))) /
        spacing;
    sum_sr += e_sr;
    sq_sr += e_sr * e_sr;
    sum_rz -= u / spacing;
  }
  const double mean = sum_sr / kDraws;
  const double se = std::sqrt((sq_sr / kDraws - mean * mean) / kDraws);
  EXPECT_LT(std::fabs(mean), 5 * se) << s.name;
  EXPECT_GT(std::fabs(sum_rz / kDraws), 100 * se) << s.name << ": the statistic can fail";
}

INSTANTIATE_TEST_SUITE_P(Formats, FpFormatTest, ::testing::Values(kFp16, kE5M2, kE4M3),
                         [](const auto& info) { return std::string(info.param.name); });

// Hand-checked values (OCP spec tables and IEEE half).
TEST(FpFormats, KnownValues) {
  EXPECT_EQ(float_to_fp16_rn(1.0f).bits, 0x3c00);
  EXPECT_EQ(float_to_fp16_rn(65504.0f).bits, 0x7bff);
  EXPECT_EQ(float_to_fp16_rn(65520.0f).bits, 0x7c00);  // tie at max + ulp/2 -> Inf
  EXPECT_EQ(float_to_fp16_rn(65519.996f).bits, 0x7bff);
  EXPECT_EQ(float_to_fp16_rn(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_fp16_rn(std::ldexp(1.0f, -25)).bits, 0x0000);  // tie -> even (0)
  EXPECT_EQ(float_to_fp16_rn(std::ldexp(3.0f, -26)).bits, 0x0001);  // 0.75 unit -> 1
  EXPECT_EQ(float_to_e4m3_rn(448.0f).bits, 0x7e);
  EXPECT_EQ(float_to_e4m3_rn(1e9f).bits, 0x7e);
  EXPECT_EQ(float_to_e4m3_rn(-1.0f).bits, 0xb8);
  EXPECT_EQ(e4m3_to_float(fp8_e4m3{0x01}), std::ldexp(1.0f, -9));
  EXPECT_EQ(float_to_e5m2_rn(57344.0f).bits, 0x7b);
  EXPECT_EQ(float_to_e5m2_rn(61440.0f).bits, 0x7c);  // tie -> Inf
  EXPECT_EQ(float_to_e5m2_rn(1.0f).bits, 0x3c);
  EXPECT_EQ(e5m2_to_float(fp8_e5m2{0x01}), std::ldexp(1.0f, -16));
  EXPECT_EQ(fp16_ulp(1.0f), std::ldexp(1.0f, -10));
  EXPECT_EQ(fp16_ulp(1e-7f), std::ldexp(1.0f, -24));
  EXPECT_EQ(e4m3_ulp(300.0f), 32.0f);
  EXPECT_EQ(e5m2_ulp(1.5f), 0.25f);
}

#if defined(__FLT16_MAX__)
// The compiler's _Float16 conversion (libgcc, round to nearest even) as a second
// independent reference on a strided sweep.
TEST(FpFormats, Fp16MatchesCompilerFloat16) {
  for (uint64_t u = 0; u < 0x100000000ull; u += 65521) {
    const float x = bits_as_float(uint32_t(u));
    if (std::isnan(x)) continue;
    const _Float16 h = static_cast<_Float16>(x);
    uint16_t want;
    std::memcpy(&want, &h, 2);
    ASSERT_EQ(float_to_fp16_rn(x).bits, want) << "x bits 0x" << std::hex << uint32_t(u);
  }
}
#endif

// The run-time dispatch goes through the same casts.
TEST(FpFormats, DispatchAndNames) {
  FpFormat f;
  RoundMode m;
  ASSERT_TRUE(parse_fp_format("e4m3", &f));
  EXPECT_EQ(f, FpFormat::kE4M3);
  EXPECT_FALSE(parse_fp_format("fp7", &f));
  ASSERT_TRUE(parse_round_mode("SR", &m));
  EXPECT_EQ(m, RoundMode::kSR);
  EXPECT_FALSE(parse_round_mode("rn", &m));
  EXPECT_EQ(fp_round(FpFormat::kBf16, RoundMode::kRN, 1.00390625f, 0), 1.0f);  // tie -> even
  EXPECT_EQ(fp_round(FpFormat::kFp16, RoundMode::kRZ, 1.0009f, 0), 1.0f);
  EXPECT_EQ(fp_round(FpFormat::kE5M2, RoundMode::kSR, 1.125f, 0xffff), 1.25f);
  EXPECT_EQ(fp_format_max(FpFormat::kE4M3), 448.0f);
  EXPECT_EQ(fp_format_ulp(FpFormat::kBf16, 1.0f), bf16_ulp(1.0f));
}

}  // namespace
}  // namespace srkit
