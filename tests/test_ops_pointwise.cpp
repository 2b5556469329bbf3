// Encoder, GELU, residual, fill_zero and sum_squares: known answers, fp64
// references, central finite differences, and bf16 against fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "kernels/cpu/ops.h"
#include "tests/test_ops_util.h"

namespace srkit::cpu {
namespace {

using namespace srkit::testing;

// Tokens repeat (3 twice, 0 three times) so dwte sums several positions.
constexpr int kB = 2, kT = 4, kC = 9, kV = 6;
const int32_t kTokens[kB * kT] = {3, 0, 5, 3, 0, 1, 0, 2};

TEST(OpsEncoder, ForwardAddsTokenAndPositionRows) {
  const auto wte = random_vec(kV * kC, 1), wpe = random_vec(kT * kC, 2);
  std::vector<float> out(kB * kT * kC);
  encoder_forward(out.data(), kTokens, wte.data(), wpe.data(), kB, kT, kC);
  for (int p = 0; p < kB * kT; ++p) {
    for (int i = 0; i < kC; ++i) {
      EXPECT_EQ(out[p * kC + i], wte[kTokens[p] * kC + i] + wpe[(p % kT) * kC + i]);
    }
  }
}

TEST(OpsEncoder, BackwardMatchesFiniteDifferences) {
  auto wte = random_vec(kV * kC, 3), wpe = random_vec(kT * kC, 4);
  const auto w = random_vec(kB * kT * kC, 5);
  std::vector<float> out(kB * kT * kC);
  auto loss = [&] {
    encoder_forward(out.data(), kTokens, wte.data(), wpe.data(), kB, kT, kC);
    return weighted_sum(out, w);
  };
  const auto dwte0 = random_vec(kV * kC, 6), dwpe0 = random_vec(kT * kC, 7);
  auto dwte = dwte0, dwpe = dwpe0;
  encoder_backward(dwte.data(), dwpe.data(), w.data(), kTokens, kB, kT, kC);
  // Linear op: differences are exact up to fp32 noise of the loss.
  expect_close(accumulated(dwte, dwte0), finite_diff(wte, loss, 1e-2f), 1e-4, 1e-4, "dwte");
  expect_close(accumulated(dwpe, dwpe0), finite_diff(wpe, loss, 1e-2f), 1e-4, 1e-4, "dwpe");
  // Token 4 never occurs: its row is untouched.
  for (int i = 0; i < kC; ++i) EXPECT_EQ(dwte[4 * kC + i], dwte0[4 * kC + i]);
}

TEST(OpsEncoder, Bf16IsFp32Rounded) {
  const auto wte = bf16_representable(random_vec(kV * kC, 8)),
             wpe = bf16_representable(random_vec(kT * kC, 9)),
             dout = bf16_representable(random_vec(kB * kT * kC, 10));
  std::vector<float> out(kB * kT * kC), dwte(kV * kC, 0.0f), dwpe(kT * kC, 0.0f);
  encoder_forward(out.data(), kTokens, wte.data(), wpe.data(), kB, kT, kC);
  encoder_backward(dwte.data(), dwpe.data(), dout.data(), kTokens, kB, kT, kC);
  const auto wte16 = to_bf16(wte), wpe16 = to_bf16(wpe), dout16 = to_bf16(dout);
  std::vector<bf16> out16(out.size()), dwte16(dwte.size(), bf16{0}), dwpe16(dwpe.size(), bf16{0});
  encoder_forward(out16.data(), kTokens, wte16.data(), wpe16.data(), kB, kT, kC);
  encoder_backward(dwte16.data(), dwpe16.data(), dout16.data(), kTokens, kB, kT, kC);
  expect_bf16_close(out16, out, 0.5f, "out");
  expect_bf16_close(dwte16, dwte, 0.5f, "dwte");
  expect_bf16_close(dwpe16, dwpe, 0.5f, "dwpe");
}

double gelu_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(OpsGelu, ForwardMatchesFp64Reference) {
  // Known points: gelu(0) = 0, gelu(1) = 0.841192 (tanh approximation), and
  // large |x| saturates to x or 0.
  const float xs[] = {0.0f, 1.0f, -1.0f, 6.0f, -6.0f};
  float out[5];
  gelu_forward(out, xs, 5);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 0.8411920f, 1e-6);
  EXPECT_NEAR(out[2], -0.1588080f, 1e-6);
  EXPECT_NEAR(out[3], 6.0f, 1e-6);
  EXPECT_NEAR(out[4], 0.0f, 1e-6);
  const auto x = random_vec(1000, 1, -5.0f, 5.0f);
  std::vector<float> y(x.size());
  gelu_forward(y.data(), x.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y[i], gelu_ref(x[i]), 1e-6 * (1.0 + std::fabs(x[i]))) << x[i];
  }
}

TEST(OpsGelu, BackwardMatchesFiniteDifferences) {
  auto x = random_vec(200, 2, -4.0f, 4.0f);
  const auto w = random_vec(x.size(), 3);
  std::vector<float> y(x.size());
  auto loss = [&] {
    gelu_forward(y.data(), x.data(), x.size());
    return weighted_sum(y, w);
  };
  const auto d0 = random_vec(x.size(), 4);
  auto d = d0;
  gelu_backward(d.data(), x.data(), w.data(), x.size());
  // |gelu'''| <= ~2, so h = 1e-2 gives truncation below 4e-5.
  expect_close(accumulated(d, d0), finite_diff(x, loss, 1e-2f), 2e-4, 1e-3, "dinp");
}

TEST(OpsGelu, Bf16IsFp32Rounded) {
  const auto x = bf16_representable(random_vec(500, 5, -5.0f, 5.0f)),
             g = bf16_representable(random_vec(500, 6)),
             d0 = bf16_representable(random_vec(500, 7));
  std::vector<float> y(x.size());
  auto d = d0;
  gelu_forward(y.data(), x.data(), x.size());
  gelu_backward(d.data(), x.data(), g.data(), x.size());
  const auto x16 = to_bf16(x), g16 = to_bf16(g);
  auto d16 = to_bf16(d0);
  std::vector<bf16> y16(x.size());
  gelu_forward(y16.data(), x16.data(), x.size());
  gelu_backward(d16.data(), x16.data(), g16.data(), x.size());
  expect_bf16_close(y16, y, 0.5f, "out");
  expect_bf16_close(d16, d, 0.5f, "dinp");
}

TEST(OpsResidual, ForwardAndBackward) {
  const size_t n = 37;
  auto a = random_vec(n, 1), b = random_vec(n, 2);
  const auto w = random_vec(n, 3);
  std::vector<float> out(n);
  residual_forward(out.data(), a.data(), b.data(), n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], a[i] + b[i]);
  auto loss = [&] {
    residual_forward(out.data(), a.data(), b.data(), n);
    return weighted_sum(out, w);
  };
  const auto da0 = random_vec(n, 4), db0 = random_vec(n, 5);
  auto da = da0, db = db0;
  residual_backward(da.data(), db.data(), w.data(), n);
  expect_close(accumulated(da, da0), finite_diff(a, loss, 1e-2f), 1e-4, 1e-4, "da");
  expect_close(accumulated(db, db0), finite_diff(b, loss, 1e-2f), 1e-4, 1e-4, "db");
  // bf16: one rounding of the fp32 sum.
  const auto a16 = to_bf16(a), b16 = to_bf16(b);
  std::vector<bf16> out16(n);
  residual_forward(out16.data(), a16.data(), b16.data(), n);
  residual_forward(out.data(), from_bf16(a16).data(), from_bf16(b16).data(), n);
  expect_bf16_close(out16, out, 0.5f, "out");
}

TEST(OpsFillZero, ZeroesBothDtypes) {
  std::vector<float> f = random_vec(100001, 1);
  fill_zero(f.data(), f.size());
  for (float x : f) ASSERT_EQ(x, 0.0f);
  std::vector<bf16> h = to_bf16(random_vec(100001, 2));
  fill_zero(h.data(), h.size());
  for (bf16 x : h) ASSERT_EQ(x.bits, 0);
}

TEST(OpsSumSquares, MatchesFp64Reference) {
  EXPECT_EQ(sum_squares(static_cast<const float*>(nullptr), 0), 0.0);
  const float three_four[] = {3.0f, 4.0f};
  EXPECT_EQ(sum_squares(three_four, 2), 25.0);
  // Spans several 64K chunks and ends mid-chunk.
  const auto x = random_vec(3 * 65536 + 123, 3, -2.0f, 2.0f);
  double ref = 0.0;
  for (float v : x) ref += double(v) * v;
  EXPECT_NEAR(sum_squares(x.data(), x.size()), ref, 1e-12 * ref);
  const auto x16 = to_bf16(x);
  double ref16 = 0.0;
  for (bf16 v : x16) ref16 += double(bf16_to_float(v)) * bf16_to_float(v);
  EXPECT_NEAR(sum_squares(x16.data(), x16.size()), ref16, 1e-12 * ref16);
}

}  // namespace
}  // namespace srkit::cpu
