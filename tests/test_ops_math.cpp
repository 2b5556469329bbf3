// exp_poly and logistic against fp64 libm: ulp error over a dense sweep of
// the range, and the special values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/common/math.h"

namespace srkit::cpu {
namespace {

// Error of `got` in units of the fp32 spacing at the exact value.
double ulp_error(float got, double exact) {
  int e;
  std::frexp(exact, &e);  // exact = m * 2^e, m in [0.5, 1)
  const double ulp = std::ldexp(1.0, std::max(e - 24, -149));
  return std::fabs(double(got) - exact) / ulp;
}

TEST(OpsMath, ExpWithinTwoUlpOverTheRange) {
  double worst = 0.0;
  // Every 1021st bit pattern (~4M floats of both signs, all magnitudes) with a
  // finite, non-zero e^x in fp32: results in normals and in denormals.
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 1021) {
    const float x = bits_as_float(uint32_t(u));
    if (!(x > -103.0f && x < 88.72f)) continue;
    worst = std::max(worst, ulp_error(exp_poly(x), std::exp(double(x))));
  }
  EXPECT_LE(worst, 2.0);
  RecordProperty("worst_ulp", std::to_string(worst));
}

TEST(OpsMath, ExpSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp_poly(0.0f), 1.0f);
  EXPECT_EQ(exp_poly(-0.0f), 1.0f);
  EXPECT_EQ(exp_poly(inf), inf);
  EXPECT_EQ(exp_poly(89.0f), inf);  // e^89 > FLT_MAX
  EXPECT_EQ(exp_poly(-inf), 0.0f);
  EXPECT_EQ(exp_poly(-105.0f), 0.0f);  // below half the smallest denormal
  EXPECT_TRUE(std::isnan(exp_poly(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_GT(exp_poly(88.7f), 3.0e38f);  // still finite
  EXPECT_GT(exp_poly(-100.0f), 0.0f);   // gradual underflow (3.7e-44)
}

TEST(OpsMath, LogisticMatchesFp64OnBothTails) {
  double worst = 0.0;
  for (float z = -110.0f; z <= 110.0f; z += 0.01f) {
    const double s = 1.0 / (1.0 + std::exp(-double(z))), t = 1.0 / (1.0 + std::exp(double(z)));
    const Logistic l = logistic(z);
    worst = std::max({worst, ulp_error(l.s, s), ulp_error(l.one_minus_s, t)});
  }
  EXPECT_LE(worst, 3.0);  // e^-|z| (<= 1.2 ulp), one add, one division, one product
  EXPECT_EQ(logistic(0.0f).s, 0.5f);
  EXPECT_EQ(logistic(200.0f).s, 1.0f);
  EXPECT_EQ(logistic(200.0f).one_minus_s, 0.0f);
  EXPECT_EQ(logistic(-200.0f).s, 0.0f);
}

}  // namespace
}  // namespace srkit::cpu
