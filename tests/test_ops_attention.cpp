// attention_forward / attention_backward against an fp64 reference, central
// finite differences, and the bf16 path against the fp32 one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/cpu/ops.h"
#include "tests/test_ops_util.h"

namespace srkit::cpu {
namespace {

using namespace srkit::testing;

constexpr int kB = 2, kT = 5, kC = 12, kNH = 3, kHS = kC / kNH;
constexpr size_t kInp = size_t(kB) * kT * 3 * kC, kOut = size_t(kB) * kT * kC,
                 kAtt = size_t(kB) * kNH * kT * kT;

struct AttentionRef {
  std::vector<double> out, preatt, att;
};

// Direct fp64 evaluation of causal softmax(q k^T / sqrt(hs)) v per head.
AttentionRef reference(const std::vector<float>& inp) {
  AttentionRef r{std::vector<double>(kOut, 0.0), std::vector<double>(kAtt, 0.0),
                 std::vector<double>(kAtt, 0.0)};
  const double scale = 1.0 / std::sqrt(double(kHS));
  auto at = [&](int b, int t, int part, int h, int i) {
    return double(inp[(size_t(b) * kT + t) * 3 * kC + part * kC + h * kHS + i]);
  };
  for (int b = 0; b < kB; ++b) {
    for (int h = 0; h < kNH; ++h) {
      for (int t = 0; t < kT; ++t) {
        const size_t row = ((size_t(b) * kNH + h) * kT + t) * kT;
        double mx = -1e300, sum = 0.0;
        for (int t2 = 0; t2 <= t; ++t2) {
          double dot = 0.0;
          for (int i = 0; i < kHS; ++i) dot += at(b, t, 0, h, i) * at(b, t2, 1, h, i);
          r.preatt[row + t2] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        for (int t2 = 0; t2 <= t; ++t2) sum += std::exp(r.preatt[row + t2] - mx);
        for (int t2 = 0; t2 <= t; ++t2) {
          const double a = std::exp(r.preatt[row + t2] - mx) / sum;
          r.att[row + t2] = a;
          for (int i = 0; i < kHS; ++i) {
            r.out[(size_t(b) * kT + t) * kC + h * kHS + i] += a * at(b, t2, 2, h, i);
          }
        }
      }
    }
  }
  return r;
}

TEST(OpsAttention, ForwardMatchesFp64Reference) {
  const auto inp = random_vec(kInp, 1, -2.0f, 2.0f);
  // Stale values in the outputs must not survive (masked entries are written).
  std::vector<float> out(kOut, 7.0f), preatt(kAtt, 7.0f), att(kAtt, 7.0f);
  attention_forward(out.data(), preatt.data(), att.data(), inp.data(), kB, kT, kC, kNH);
  const AttentionRef ref = reference(inp);
  expect_close(to_f64(preatt), ref.preatt, 1e-6, 1e-6, "preatt");
  expect_close(to_f64(att), ref.att, 1e-6, 1e-6, "att");
  expect_close(to_f64(out), ref.out, 1e-6, 1e-6, "out");
  // The first query sees only itself: att = 1, out = v.
  EXPECT_EQ(att[0], 1.0f);
  for (int i = 0; i < kHS; ++i) EXPECT_EQ(out[i], inp[2 * kC + i]);
}

TEST(OpsAttention, BackwardMatchesFiniteDifferences) {
  auto inp = random_vec(kInp, 2, -2.0f, 2.0f);
  const auto w = random_vec(kOut, 3);
  std::vector<float> out(kOut), preatt(kAtt), att(kAtt);
  auto loss = [&] {
    attention_forward(out.data(), preatt.data(), att.data(), inp.data(), kB, kT, kC, kNH);
    return weighted_sum(out, w);
  };
  loss();
  const auto dinp0 = random_vec(kInp, 4);
  auto dinp = dinp0;
  std::vector<float> dpreatt(kAtt, 7.0f), datt(kAtt, 7.0f);
  attention_backward(dinp.data(), dpreatt.data(), datt.data(), w.data(), inp.data(), att.data(), kB,
                     kT, kC, kNH);
  // Smooth in q, k, v with O(1) curvature at |inputs| <= 2: h = 1e-2 leaves
  // truncation and fp32 noise near 1e-5.
  expect_close(accumulated(dinp, dinp0), finite_diff(inp, loss, 1e-2f), 5e-4, 1e-3, "dinp");
  // Scratch outputs: masked entries zeroed, and dpreatt rows sum to 0 (softmax).
  for (size_t r = 0; r < kAtt / kT; ++r) {
    const int t = int(r % kT);
    double row_sum = 0.0;
    for (int t2 = 0; t2 < kT; ++t2) {
      if (t2 > t) {
        EXPECT_EQ(dpreatt[r * kT + t2], 0.0f);
        EXPECT_EQ(datt[r * kT + t2], 0.0f);
      }
      row_sum += dpreatt[r * kT + t2];
    }
    EXPECT_NEAR(row_sum, 0.0, 1e-6);
  }
}

TEST(OpsAttention, Bf16CloseToFp32) {
  const auto inp = bf16_representable(random_vec(kInp, 5, -2.0f, 2.0f));
  std::vector<float> out(kOut), preatt(kAtt), att(kAtt);
  attention_forward(out.data(), preatt.data(), att.data(), inp.data(), kB, kT, kC, kNH);
  const auto inp16 = to_bf16(inp);
  std::vector<bf16> out16(kOut), preatt16(kAtt), att16(kAtt);
  attention_forward(out16.data(), preatt16.data(), att16.data(), inp16.data(), kB, kT, kC, kNH);
  // preatt and att: the fp32 values rounded once.
  expect_bf16_close(preatt16, preatt, 0.5f, "preatt");
  expect_bf16_close(att16, att, 0.5f, "att");
  // out sums att * v with each att off by at most the bf16 unit roundoff 2^-8
  // (relative), then rounds once more: error <= 2^-8 * (sum_t2 att |v| + |out|)
  // <= 2^-8 * (max |v| + |out|).
  float vmax = 0.0f;
  for (size_t j = 0; j < kInp; ++j) {
    if ((j / kC) % 3 == 2) vmax = std::max(vmax, std::fabs(inp[j]));
  }
  for (size_t j = 0; j < kOut; ++j) {
    EXPECT_NEAR(bf16_to_float(out16[j]), out[j], std::ldexp(vmax + std::fabs(out[j]), -8)) << j;
  }
  // Backward from the same saved att: identical fp32 math, one rounding.
  const auto dout = bf16_representable(random_vec(kOut, 6));
  const auto att_r = from_bf16(att16);
  std::vector<float> dinp(kInp, 0.0f), dpre(kAtt), datt(kAtt);
  attention_backward(dinp.data(), dpre.data(), datt.data(), dout.data(), inp.data(), att_r.data(),
                     kB, kT, kC, kNH);
  const auto dout16 = to_bf16(dout);
  std::vector<bf16> dinp16(kInp, bf16{0}), dpre16(kAtt), datt16(kAtt);
  attention_backward(dinp16.data(), dpre16.data(), datt16.data(), dout16.data(), inp16.data(),
                     att16.data(), kB, kT, kC, kNH);
  expect_bf16_close(dinp16, dinp, 0.5f, "dinp");
  expect_bf16_close(datt16, datt, 0.5f, "datt");
  expect_bf16_close(dpre16, dpre, 0.5f, "dpreatt");
}

TEST(OpsAttention, RejectsHeadsNotDividingChannels) {
  float x[64] = {};
  EXPECT_THROW(attention_forward(x, x, x, x, 1, 2, 10, 3), std::invalid_argument);
  EXPECT_THROW(attention_backward(x, x, x, x, x, x, 1, 2, 10, 4), std::invalid_argument);
}

}  // namespace
}  // namespace srkit::cpu
