// Stochastic rounding fp32 -> bf16 (float_to_bf16_sr with the contract's bits):
// calibrated probabilities, unbiasedness, only the two neighbours, exact values
// fixed, specials, and the documented top-of-range behaviour. Statistical
// checks use fixed seeds and 5-sigma binomial / normal tolerances, so a correct
// implementation fails with probability ~1e-6 per check and the outcome is
// deterministic for a given seed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/sr_bits.h"
#include "kernels/cpu/cast.h"

namespace srkit {
namespace {

constexpr RngPurpose kPurpose = RngPurpose::kCast;

uint16_t sr(uint32_t u, uint32_t r) { return float_to_bf16_sr(bits_as_float(u), r).bits; }

// SR of n copies of x with the contract's bits for indices 0..n-1.
std::vector<bf16> sr_copies(float x, size_t n, uint64_t seed) {
  std::vector<float> in(n, x);
  std::vector<bf16> out(n);
  cpu::cast_f32_to_bf16_sr(in.data(), out.data(), n, seed, kPurpose, 0, 0);
  return out;
}

// Fraction of draws that rounded to `up`, checked against probability p within
// 5 binomial standard deviations.
void expect_p_up(float x, uint16_t up, double p, size_t n, uint64_t seed) {
  const std::vector<bf16> out = sr_copies(x, n, seed);
  size_t count = 0;
  for (const bf16& h : out) count += h.bits == up;
  const double sigma = std::sqrt(p * (1 - p) / double(n));
  EXPECT_NEAR(double(count) / double(n), p, 5 * sigma + 1e-12)
      << "x bits 0x" << std::hex << float_as_bits(x);
}

// x = lo + f*ulp with f = k/65536 exactly (16 dropped bits): P(up) = f.
TEST(Bf16Sr, ProbabilityOfRoundingUpIsTheFraction) {
  constexpr size_t kDraws = 1'000'000;
  const uint32_t fractions[] = {1, 6554, 16384, 32768, 49152, 58982, 65535};  // /65536
  for (uint32_t k : fractions) {
    const double p = double(k) / 65536.0;
    expect_p_up(bits_as_float(0x3f800000u | k), 0x3f81, p, kDraws, 1);       // 1 + f/128
    expect_p_up(bits_as_float(0xc2f60000u | k), 0xc2f7, p, kDraws, 2);       // negative
    expect_p_up(bits_as_float(0x00050000u | k), 0x0006, p, kDraws, 3);       // subnormal
    expect_p_up(bits_as_float(0x7f7e0000u | k), 0x7f7f, p, kDraws / 10, 4);  // near the top
  }
}

// E[SR(x)] = x: the mean error over 10^7 draws is zero within 5 standard errors.
// The same data under truncation (RZ) is biased by thousands of standard errors:
// the statistic can fail.
TEST(Bf16Sr, MeanErrorIsUnbiased) {
  constexpr size_t kDraws = 10'000'000;
  std::vector<float> x(kDraws);
  for (size_t i = 0; i < kDraws; ++i) {
    // Varied magnitudes and signs, every dropped-bit pattern: a hash of i.
    const uint32_t h = uint32_t((uint64_t(i) * 0x9E3779B97F4A7C15ull) >> 32);
    x[i] = bits_as_float((h & 0x8000ffffu) | ((0x70u + (h >> 16) % 24u) << 23) | (h & 0x7f0000u));
  }
  std::vector<bf16> y(kDraws);
  cpu::cast_f32_to_bf16_sr(x.data(), y.data(), kDraws, 77, kPurpose, 5, 0);
  // Errors in magnitude (|q| - |x|, so RZ's bias is one-signed for both signs),
  // in units of the local ulp so all magnitudes weigh the same.
  auto z_score = [&](auto&& round) {
    double sum = 0, sum_sq = 0;
    for (size_t i = 0; i < kDraws; ++i) {
      const double q = std::fabs(double(bf16_to_float(round(i))));
      const double e = (q - std::fabs(double(x[i]))) / bf16_ulp(x[i]);
      sum += e;
      sum_sq += e * e;
    }
    const double mean = sum / kDraws;
    const double sd = std::sqrt(sum_sq / kDraws - mean * mean);
    return mean / (sd / std::sqrt(double(kDraws)));
  };
  EXPECT_LT(std::fabs(z_score([&](size_t i) { return y[i]; })), 5.0);
  EXPECT_LT(z_score([&](size_t i) { return float_to_bf16_rz(x[i]); }), -1000.0);
  // A fixed value: the mean of SR(0.1f) over 10^7 draws equals 0.1f.
  const float v = 0.1f;
  const std::vector<bf16> out = sr_copies(v, kDraws, 78);
  double sum = 0, sum_sq = 0;
  for (const bf16& h : out) {
    const double e = double(bf16_to_float(h)) - double(v);
    sum += e;
    sum_sq += e * e;
  }
  const double mean = sum / kDraws;
  const double se = std::sqrt((sum_sq / kDraws - mean * mean) / kDraws);
  EXPECT_LT(std::fabs(mean / se), 5.0) << "mean error " << mean;
}

// SR(x) is RZ(x) or the next bf16 away from zero (one ulp up in magnitude,
// which is Inf above the largest finite), for random finite x and bits.
TEST(Bf16Sr, OnlyTheTwoNeighbours) {
  uint64_t state = 12345;
  for (int t = 0; t < 2'000'000; ++t) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t u = uint32_t(state >> 32);
    if ((u & 0x7f800000u) == 0x7f800000u) continue;  // Inf/NaN: own test
    const uint32_t r = uint32_t(state >> 8) & 0xffffu;
    const uint16_t down = uint16_t(u >> 16);
    const uint16_t got = sr(u, r);
    ASSERT_TRUE(got == down || got == down + 1)
        << "x 0x" << std::hex << u << " r 0x" << r << " gave 0x" << got;
    // The bits decide: up exactly when the dropped half plus r carries.
    ASSERT_EQ(got == down + 1, (u & 0xffffu) + r >= 0x10000u);
  }
}

TEST(Bf16Sr, ExactValuesNeverMove) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint32_t u = h << 16;
    if ((u & 0x7f800000u) == 0x7f800000u) continue;
    for (uint32_t r : {0u, 1u, 0x7fffu, 0x8000u, 0xffffu}) {
      ASSERT_EQ(sr(u, r), h) << "bf16 0x" << std::hex << h << " r 0x" << r;
    }
  }
}

TEST(Bf16Sr, SpecialsPreserved) {
  for (uint32_t r : {0u, 1u, 0x8000u, 0xffffu}) {
    EXPECT_EQ(sr(0x7f800000u, r), 0x7f80) << "+Inf";
    EXPECT_EQ(sr(0xff800000u, r), 0xff80) << "-Inf";
    EXPECT_EQ(sr(0x7fc00000u, r), 0x7fc0) << "quiet NaN";
    EXPECT_EQ(sr(0xffc00000u, r), 0xffc0) << "negative quiet NaN";
    EXPECT_EQ(sr(0x7f800001u, r), 0x7fc0) << "signalling NaN, low payload: NaN, not Inf";
    EXPECT_EQ(sr(0x7fffffffu, r), 0x7fff) << "all-ones NaN must not wrap to -0";
    EXPECT_EQ(sr(0x00000000u, r), 0x0000) << "+0";
    EXPECT_EQ(sr(0x80000000u, r), 0x8000) << "-0";
  }
}

// bf16.h: above the largest finite bf16 (0x7f7f) a finite float rounds to Inf
// with probability equal to its fraction (like hardware SR); the mean is not
// preserved there.
TEST(Bf16Sr, TopOfRange) {
  const float flt_max = std::numeric_limits<float>::max();  // 0x7f7fffff
  EXPECT_EQ(sr(0x7f7fffffu, 0), 0x7f7f);
  EXPECT_EQ(sr(0x7f7fffffu, 1), 0x7f80) << "any non-zero bits carry FLT_MAX to Inf";
  EXPECT_EQ(sr(0xff7fffffu, 0xffff), 0xff80) << "-FLT_MAX to -Inf";
  EXPECT_EQ(sr(0x7f7f0000u, 0xffff), 0x7f7f) << "largest finite bf16 is exact";
  expect_p_up(bits_as_float(0x7f7f8000u), 0x7f80, 0.5, 200'000, 9);
  expect_p_up(bits_as_float(0xff7f4000u), 0xff80, 0.25, 200'000, 10);
  expect_p_up(flt_max, 0x7f80, 65535.0 / 65536.0, 200'000, 11);
}

// With no random bits SR truncates; with all ones it rounds every inexact
// value away from zero.
TEST(Bf16Sr, ExtremeBits) {
  uint64_t state = 99;
  for (int t = 0; t < 100'000; ++t) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t u = uint32_t(state >> 32);
    if ((u & 0x7f800000u) == 0x7f800000u) continue;
    EXPECT_EQ(sr(u, 0), float_to_bf16_rz(bits_as_float(u)).bits);
    EXPECT_EQ(sr(u, 0xffff), uint16_t((u >> 16) + ((u & 0xffffu) != 0)));
    EXPECT_EQ(sr(u, 0x10000u | 5u), sr(u, 5u)) << "only the low 16 bits of r are used";
  }
}

}  // namespace
}  // namespace srkit
