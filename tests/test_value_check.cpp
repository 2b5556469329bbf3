// first_bad_value (lib/checkpoint/value_check.h): the first NaN/Inf, or negative
// value when asked, at any position (block edges included) and for every bit
// pattern class of f32 and bf16, against a plain element-by-element reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "lib/checkpoint/value_check.h"

using namespace srkit;

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The reference, one element at a time through the float value.
BadValue reference(const std::vector<float>& v, bool non_negative) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) return {i, true};
    if (non_negative && v[i] < 0) return {i, false};
  }
  return {v.size(), false};
}

std::vector<uint16_t> to_bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = uint16_t(bits_of(v[i]) >> 16);  // truncation
  return out;
}

void expect_same(const std::vector<float>& v, bool non_negative) {
  const BadValue want = reference(v, non_negative);
  const BadValue f32 = first_bad_value(DType::kF32, v.data(), v.size(), non_negative);
  EXPECT_EQ(f32.index, want.index);
  EXPECT_EQ(f32.non_finite, want.non_finite);
  // Truncating keeps sign, Inf and NaN (the top 7 mantissa bits of these test
  // NaNs are non-zero) and makes no finite value non-finite.
  const std::vector<uint16_t> b = to_bf16_bits(v);
  const BadValue bf16 = first_bad_value(DType::kBF16, b.data(), b.size(), non_negative);
  EXPECT_EQ(bf16.index, want.index);
  EXPECT_EQ(bf16.non_finite, want.non_finite);
}

}  // namespace

TEST(ValueCheck, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny_negative = -std::numeric_limits<float>::denorm_min() * 65536;  // bf16-visible
  for (bool non_negative : {false, true}) {
    expect_same({1, 2, 3}, non_negative);
    expect_same({}, non_negative);
    expect_same({0.0f, -0.0f, 1e-40f, 3e38f}, non_negative);  // -0 is zero
    expect_same({1, -2, 3}, non_negative);
    expect_same({1, tiny_negative, 3}, non_negative);
    expect_same({1, 2, inf}, non_negative);
    expect_same({-inf, 2}, non_negative);
    expect_same({1, -nan, 2}, non_negative);
    expect_same({1, -5, nan}, non_negative);
  }
}

// A bad value planted at random places (fixed seed), block edges (4096) among
// them, in long arrays of random finite values of both signs.
TEST(ValueCheck, FindsThePlantedValueAnywhere) {
  std::mt19937 rng(2024);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float planted[] = {std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(), -1e-3f};
  for (size_t n : {size_t(1), size_t(4095), size_t(4096), size_t(4097), size_t(20000)}) {
    std::vector<float> v(n);
    for (float& x : v) x = std::fabs(normal(rng));
    for (size_t at : {size_t(0), n / 2, n - 1, std::min(n - 1, size_t(4095)),
                      std::min(n - 1, size_t(4096)), size_t(rng() % n)}) {
      for (float bad : planted) {
        std::vector<float> w = v;
        w[at] = bad;
        if (at + 7 < n) w[at + 7] = -bad;  // a later one must not win
        expect_same(w, true);
        expect_same(w, false);
      }
    }
  }
}
