// layernorm_forward / layernorm_backward against an fp64 reference, central
// finite differences, and the bf16 path against the fp32 one.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "kernels/cpu/ops.h"
#include "tests/test_ops_util.h"

namespace srkit::cpu {
namespace {

using namespace srkit::testing;

constexpr int kN = 5, kC = 19;  // C not a multiple of the 8-lane vectors

TEST(OpsLayernorm, KnownAnswer) {
  // x = [1,2,3,4]: mean 2.5, variance 1.25.
  const float inp[] = {1, 2, 3, 4}, weight[] = {1, 1, 2, 1}, bias[] = {0, 0, 0, 0.5f};
  float out[4], mean, rstd;
  layernorm_forward(out, &mean, &rstd, inp, weight, bias, 1, 4);
  const double s = 1.0 / std::sqrt(1.25 + 1e-5);
  EXPECT_FLOAT_EQ(mean, 2.5f);
  EXPECT_FLOAT_EQ(rstd, float(s));
  EXPECT_FLOAT_EQ(out[0], float(-1.5 * s));
  EXPECT_FLOAT_EQ(out[1], float(-0.5 * s));
  EXPECT_FLOAT_EQ(out[2], float(2 * 0.5 * s));
  EXPECT_FLOAT_EQ(out[3], float(1.5 * s + 0.5));
}

TEST(OpsLayernorm, ForwardMatchesFp64Reference) {
  const auto inp = random_vec(kN * kC, 1, -2.0f, 3.0f), weight = random_vec(kC, 2),
             bias = random_vec(kC, 3);
  std::vector<float> out(kN * kC), mean(kN), rstd(kN);
  layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(),
                    kN, kC);
  for (int n = 0; n < kN; ++n) {
    double m = 0.0, v = 0.0;
    for (int i = 0; i < kC; ++i) m += inp[n * kC + i];
    m /= kC;
    for (int i = 0; i < kC; ++i) v += (inp[n * kC + i] - m) * (inp[n * kC + i] - m);
    const double s = 1.0 / std::sqrt(v / kC + 1e-5);
    EXPECT_NEAR(mean[n], m, 1e-6);
    EXPECT_NEAR(rstd[n], s, 1e-6 * s);
    for (int i = 0; i < kC; ++i) {
      const double ref = (inp[n * kC + i] - m) * s * weight[i] + bias[i];
      EXPECT_NEAR(out[n * kC + i], ref, 2e-6) << n << "," << i;
    }
  }
}

TEST(OpsLayernorm, BackwardMatchesFiniteDifferences) {
  auto inp = random_vec(kN * kC, 4, -2.0f, 3.0f), weight = random_vec(kC, 5),
       bias = random_vec(kC, 6);
  const auto w = random_vec(kN * kC, 7);
  std::vector<float> out(kN * kC), mean(kN), rstd(kN);
  auto loss = [&] {
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(),
                      kN, kC);
    return weighted_sum(out, w);
  };
  loss();  // mean, rstd at the unperturbed point
  const auto dinp0 = random_vec(kN * kC, 8), dw0 = random_vec(kC, 9), db0 = random_vec(kC, 10);
  auto dinp = dinp0, dw = dw0, db = db0;
  layernorm_backward(dinp.data(), dw.data(), db.data(), w.data(), inp.data(), weight.data(),
                     mean.data(), rstd.data(), kN, kC);
  // Curvature is O(rstd^2) ~ 1 here; h = 1e-2 keeps the O(h^2) truncation and the
  // fp32 loss noise (~1e-6 / 2h) both below 1e-4.
  const float h = 1e-2f;
  expect_close(accumulated(dinp, dinp0), finite_diff(inp, loss, h), 5e-4, 1e-3, "dinp");
  expect_close(accumulated(dw, dw0), finite_diff(weight, loss, h), 5e-4, 1e-3, "dweight");
  expect_close(accumulated(db, db0), finite_diff(bias, loss, h), 5e-4, 1e-3, "dbias");
}

TEST(OpsLayernorm, Bf16CloseToFp32) {
  const auto inp = bf16_representable(random_vec(kN * kC, 11, -2.0f, 3.0f)),
             weight = bf16_representable(random_vec(kC, 12)),
             bias = bf16_representable(random_vec(kC, 13)),
             dout = bf16_representable(random_vec(kN * kC, 14));
  std::vector<float> out(kN * kC), mean(kN), rstd(kN);
  layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(),
                    kN, kC);
  std::vector<bf16> out16(kN * kC);
  std::vector<float> mean16(kN), rstd16(kN);
  const auto inp16 = to_bf16(inp), weight16 = to_bf16(weight), bias16 = to_bf16(bias),
             dout16 = to_bf16(dout);
  layernorm_forward(out16.data(), mean16.data(), rstd16.data(), inp16.data(), weight16.data(),
                    bias16.data(), kN, kC);
  // Same fp32 math on the same values, rounded once (the fp32 reductions may
  // differ in their last bit between the two instantiations' vector code).
  expect_bf16_close(out16, out, 1.0f, "out");
  for (int n = 0; n < kN; ++n) {
    EXPECT_NEAR(mean16[n], mean[n], 1e-6);
    EXPECT_NEAR(rstd16[n], rstd[n], 1e-6 * rstd[n]);
  }
  std::vector<float> dinp(kN * kC, 0.0f), dw(kC, 0.0f), db(kC, 0.0f);
  layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), weight.data(),
                     mean.data(), rstd.data(), kN, kC);
  std::vector<bf16> dinp16(kN * kC), dw16(kC), db16(kC);
  layernorm_backward(dinp16.data(), dw16.data(), db16.data(), dout16.data(), inp16.data(),
                     weight16.data(), mean.data(), rstd.data(), kN, kC);
  expect_bf16_close(dinp16, dinp, 1.0f, "dinp");
  expect_bf16_close(dw16, dw, 1.0f, "dweight");
  expect_bf16_close(db16, db, 1.0f, "dbias");
}

TEST(OpsLayernorm, RejectsBadShapes) {
  float x[4] = {};
  EXPECT_THROW(layernorm_forward(x, x, x, x, x, x, 0, 4), std::invalid_argument);
  EXPECT_THROW(layernorm_backward(x, x, x, x, x, x, x, x, 1, -4), std::invalid_argument);
}

}  // namespace
}  // namespace srkit::cpu
