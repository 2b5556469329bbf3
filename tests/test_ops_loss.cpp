// Cross-entropy and softmax_row: fp64 references, central finite differences,
// padding and ignored targets, in-place backward, bf16 against fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "kernels/cpu/ops.h"
#include "tests/test_ops_util.h"

namespace srkit::cpu {
namespace {

using namespace srkit::testing;

constexpr int kN = 4, kV = 10, kVp = 16;
const int32_t kTargets[kN] = {3, 0, 9, 5};

// Logits with NaN in the padding columns: any read of them poisons the result.
std::vector<float> padded_logits(uint64_t seed) {
  auto l = random_vec(size_t(kN) * kVp, seed, -3.0f, 3.0f);
  for (int n = 0; n < kN; ++n) {
    for (int v = kV; v < kVp; ++v) l[n * kVp + v] = std::numeric_limits<float>::quiet_NaN();
  }
  return l;
}

std::vector<double> softmax_ref(const float* l, int V) {
  double mx = l[0], sum = 0.0;
  for (int v = 1; v < V; ++v) mx = std::max(mx, double(l[v]));
  std::vector<double> p(V);
  for (int v = 0; v < V; ++v) sum += p[v] = std::exp(l[v] - mx);
  for (double& x : p) x /= sum;
  return p;
}

TEST(OpsCrossEntropy, ForwardMatchesFp64ReferenceAndIgnoresPadding) {
  const auto logits = padded_logits(1);
  std::vector<float> losses(kN);
  crossentropy_forward(losses.data(), logits.data(), kTargets, kN, kV, kVp);
  for (int n = 0; n < kN; ++n) {
    const auto p = softmax_ref(&logits[n * kVp], kV);
    EXPECT_NEAR(losses[n], -std::log(p[kTargets[n]]), 1e-6) << n;
  }
  // Uniform logits: loss = log V exactly in the reference.
  std::vector<float> flat(kVp, 0.5f);
  float loss;
  const int32_t t0 = 2;
  crossentropy_forward(&loss, flat.data(), &t0, 1, kV, kVp);
  EXPECT_NEAR(loss, std::log(double(kV)), 1e-6);
}

TEST(OpsCrossEntropy, BackwardMatchesFiniteDifferences) {
  auto logits = random_vec(size_t(kN) * kVp, 2, -3.0f, 3.0f);
  const float dloss = 0.7f;
  std::vector<float> losses(kN);
  auto loss = [&] {
    crossentropy_forward(losses.data(), logits.data(), kTargets, kN, kV, kVp);
    double s = 0.0;
    for (float x : losses) s += double(dloss) * x;
    return s;
  };
  std::vector<float> dlogits(logits.size(), 7.0f);  // overwritten, not accumulated
  crossentropy_backward(dlogits.data(), logits.data(), kTargets, dloss, kN, kV, kVp);
  // Padding columns do not enter the loss: their finite differences are 0 too.
  expect_close(to_f64(dlogits), finite_diff(logits, loss, 1e-2f), 2e-4, 1e-3, "dlogits");
}

TEST(OpsCrossEntropy, IgnoredTargetsGiveNoLossAndNoGradient) {
  const auto logits = padded_logits(3);
  const int32_t targets[kN] = {3, -1, 9, -100};
  std::vector<float> losses(kN, 7.0f), full(kN);
  crossentropy_forward(losses.data(), logits.data(), targets, kN, kV, kVp);
  crossentropy_forward(full.data(), logits.data(), kTargets, kN, kV, kVp);
  EXPECT_EQ(losses[0], full[0]);
  EXPECT_EQ(losses[1], 0.0f);
  EXPECT_EQ(losses[2], full[2]);
  EXPECT_EQ(losses[3], 0.0f);
  std::vector<float> d(logits.size(), 7.0f);
  crossentropy_backward(d.data(), logits.data(), targets, 1.0f, kN, kV, kVp);
  for (int n = 0; n < kN; ++n) {
    double row_sum = 0.0;
    for (int v = 0; v < kVp; ++v) {
      const float g = d[n * kVp + v];
      ASSERT_FALSE(std::isnan(g)) << n << "," << v;
      if (targets[n] < 0 || v >= kV) EXPECT_EQ(g, 0.0f) << n << "," << v;
      row_sum += g;
    }
    EXPECT_NEAR(row_sum, 0.0, 1e-6);  // softmax - onehot sums to 0 over a row
  }
}

TEST(OpsCrossEntropy, BackwardInPlaceMatchesOutOfPlace) {
  const auto logits = padded_logits(4);
  std::vector<float> d(logits.size());
  crossentropy_backward(d.data(), logits.data(), kTargets, 0.25f, kN, kV, kVp);
  auto inplace = logits;
  crossentropy_backward(inplace.data(), inplace.data(), kTargets, 0.25f, kN, kV, kVp);
  EXPECT_EQ(inplace, d);
}

TEST(OpsCrossEntropy, Bf16MatchesFp32) {
  const auto logits = bf16_representable(random_vec(size_t(kN) * kVp, 5, -3.0f, 3.0f));
  const auto logits16 = to_bf16(logits);
  std::vector<float> l32(kN), l16(kN);
  crossentropy_forward(l32.data(), logits.data(), kTargets, kN, kV, kVp);
  crossentropy_forward(l16.data(), logits16.data(), kTargets, kN, kV, kVp);
  for (int n = 0; n < kN; ++n) EXPECT_NEAR(l16[n], l32[n], 1e-6 * std::fabs(l32[n])) << n;
  std::vector<float> d32(logits.size());
  std::vector<bf16> d16(logits.size());
  crossentropy_backward(d32.data(), logits.data(), kTargets, 0.5f, kN, kV, kVp);
  crossentropy_backward(d16.data(), logits16.data(), kTargets, 0.5f, kN, kV, kVp);
  expect_bf16_close(d16, d32, 0.5f, "dlogits");
}

TEST(OpsCrossEntropy, RejectsTargetOutsideVocabulary) {
  const auto logits = padded_logits(6);
  std::vector<float> losses(kN);
  const int32_t bad[kN] = {0, 1, kV, 2};  // a padding column is not a valid target
  EXPECT_THROW(crossentropy_forward(losses.data(), logits.data(), bad, kN, kV, kVp),
               std::invalid_argument);
  std::vector<float> d(logits.size());
  EXPECT_THROW(crossentropy_backward(d.data(), logits.data(), bad, 1.0f, kN, kV, kVp),
               std::invalid_argument);
  EXPECT_THROW(crossentropy_forward(losses.data(), logits.data(), kTargets, kN, kVp + 1, kVp),
               std::invalid_argument);
}

TEST(OpsSoftmaxRow, MatchesFp64Reference) {
  const auto l = random_vec(kV, 7, -30.0f, 30.0f);  // wide range: max subtraction matters
  std::vector<float> p(kV);
  softmax_row(p.data(), l.data(), kV);
  expect_close(to_f64(p), softmax_ref(l.data(), kV), 1e-7, 1e-6, "probs");
  const auto l16 = to_bf16(l);
  std::vector<float> p16(kV);
  softmax_row(p16.data(), l16.data(), kV);
  expect_close(to_f64(p16), softmax_ref(from_bf16(l16).data(), kV), 1e-7, 1e-6, "probs bf16");
}

}  // namespace
}  // namespace srkit::cpu
