// softmax_row, a CPU kernel with no Backend entry point (the other ops' tests
// live in the backend conformance suite, tests/conformance/): against an fp64
// reference, for fp32 and bf16 logits over a wide range.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/loss.h"
#include "tests/test_ops_util.h"

namespace srkit::cpu {
namespace {

using namespace srkit::testing;

constexpr int kV = 10;

std::vector<double> softmax_ref(const float* l, int V) {
  double mx = l[0], sum = 0.0;
  for (int v = 1; v < V; ++v) mx = std::max(mx, double(l[v]));
  std::vector<double> p(V);
  for (int v = 0; v < V; ++v) sum += p[v] = std::exp(l[v] - mx);
  for (double& x : p) x /= sum;
  return p;
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
