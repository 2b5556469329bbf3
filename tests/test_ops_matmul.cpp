// matmul_forward / matmul_backward against fp64 references, central finite
// differences, and the bf16 path against the fp32 one.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "kernels/cpu/ops.h"
#include "tests/test_ops_util.h"

namespace srkit::cpu {
namespace {

using namespace srkit::testing;

// Odd sizes so no dimension is a multiple of a SIMD or BLAS block.
constexpr int kN = 7, kC = 13, kOC = 11;

TEST(OpsMatmul, TinyKnownAnswer) {
  // [[1,2],[3,4]] @ [[1,0],[1,1],[0,2]]^T + [10,20,30] = [[11,23,34],[13,27,38]]
  const float inp[] = {1, 2, 3, 4}, weight[] = {1, 0, 1, 1, 0, 2}, bias[] = {10, 20, 30};
  float out[6];
  Workspace ws;
  matmul_forward(out, inp, weight, bias, 2, 2, 3, ws);
  const float want[] = {11, 23, 34, 13, 27, 38};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], want[i]) << i;
}

TEST(OpsMatmul, ForwardMatchesFp64Reference) {
  const auto inp = random_vec(kN * kC, 1), weight = random_vec(kOC * kC, 2),
             bias = random_vec(kOC, 3);
  Workspace ws;
  for (bool with_bias : {false, true}) {
    std::vector<float> out(kN * kOC);
    matmul_forward(out.data(), inp.data(), weight.data(), with_bias ? bias.data() : nullptr, kN, kC,
                   kOC, ws);
    for (int n = 0; n < kN; ++n) {
      for (int o = 0; o < kOC; ++o) {
        double ref = with_bias ? bias[o] : 0.0, mag = std::fabs(ref);
        for (int c = 0; c < kC; ++c) {
          const double term = double(inp[n * kC + c]) * weight[o * kC + c];
          ref += term;
          mag += std::fabs(term);
        }
        // fp32 accumulation of kC terms: error well below 1e-6 of the magnitude sum.
        EXPECT_NEAR(out[n * kOC + o], ref, 1e-6 * mag) << n << "," << o;
      }
    }
  }
}

TEST(OpsMatmul, BackwardMatchesFiniteDifferences) {
  auto inp = random_vec(kN * kC, 4), weight = random_vec(kOC * kC, 5), bias = random_vec(kOC, 6);
  const auto w = random_vec(kN * kOC, 7);  // dL/dout
  Workspace ws;
  std::vector<float> out(kN * kOC);
  auto loss = [&] {
    matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), kN, kC, kOC, ws);
    return weighted_sum(out, w);
  };
  // Gradients start non-zero: backward must accumulate.
  const auto dinp0 = random_vec(kN * kC, 8), dweight0 = random_vec(kOC * kC, 9),
             dbias0 = random_vec(kOC, 10);
  auto dinp = dinp0, dweight = dweight0, dbias = dbias0;
  matmul_backward(dinp.data(), dweight.data(), dbias.data(), w.data(), inp.data(), weight.data(),
                  kN, kC, kOC, ws);
  // Bilinear op: central differences are exact up to fp32 rounding of the loss
  // (~1e-6 / 2h), so the tolerances are tight.
  const float h = 1e-2f;
  expect_close(accumulated(dinp, dinp0), finite_diff(inp, loss, h), 2e-4, 1e-4, "dinp");
  expect_close(accumulated(dweight, dweight0), finite_diff(weight, loss, h), 2e-4, 1e-4, "dweight");
  expect_close(accumulated(dbias, dbias0), finite_diff(bias, loss, h), 2e-4, 1e-4, "dbias");
}

TEST(OpsMatmul, BackwardWithoutBiasGradient) {
  const auto inp = random_vec(kN * kC, 11), weight = random_vec(kOC * kC, 12),
             dout = random_vec(kN * kOC, 13);
  Workspace ws;
  std::vector<float> dinp_a(kN * kC, 0.0f), dw_a(kOC * kC, 0.0f), db(kOC, 0.0f);
  auto dinp_b = dinp_a, dw_b = dw_a;
  matmul_backward(dinp_a.data(), dw_a.data(), db.data(), dout.data(), inp.data(), weight.data(), kN,
                  kC, kOC, ws);
  matmul_backward(dinp_b.data(), dw_b.data(), static_cast<float*>(nullptr), dout.data(), inp.data(),
                  weight.data(), kN, kC, kOC, ws);
  EXPECT_EQ(dinp_a, dinp_b);
  EXPECT_EQ(dw_a, dw_b);
}

TEST(OpsMatmul, Bf16ForwardIsFp32ForwardRounded) {
  const auto inp = bf16_representable(random_vec(kN * kC, 14)),
             weight = bf16_representable(random_vec(kOC * kC, 15)),
             bias = bf16_representable(random_vec(kOC, 16));
  Workspace ws;
  std::vector<float> out32(kN * kOC);
  matmul_forward(out32.data(), inp.data(), weight.data(), bias.data(), kN, kC, kOC, ws);
  std::vector<bf16> out16(kN * kOC);
  const auto inp16 = to_bf16(inp), weight16 = to_bf16(weight), bias16 = to_bf16(bias);
  matmul_forward(out16.data(), inp16.data(), weight16.data(), bias16.data(), kN, kC, kOC, ws);
  // Same sgemm on the same values, bias added in fp32, one rounding: <= 0.5 ulp.
  expect_bf16_close(out16, out32, 0.5f, "out");
}

TEST(OpsMatmul, Bf16BackwardIsFp32BackwardRounded) {
  const auto inp = bf16_representable(random_vec(kN * kC, 17)),
             weight = bf16_representable(random_vec(kOC * kC, 18)),
             dout = bf16_representable(random_vec(kN * kOC, 19)),
             dinp0 = bf16_representable(random_vec(kN * kC, 20)),
             dw0 = bf16_representable(random_vec(kOC * kC, 21)),
             db0 = bf16_representable(random_vec(kOC, 22));
  Workspace ws;
  auto dinp = dinp0, dw = dw0, db = db0;
  matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), weight.data(), kN, kC,
                  kOC, ws);
  auto dinp16 = to_bf16(dinp0), dw16 = to_bf16(dw0), db16 = to_bf16(db0);
  const auto inp16 = to_bf16(inp), weight16 = to_bf16(weight), dout16 = to_bf16(dout);
  matmul_backward(dinp16.data(), dw16.data(), db16.data(), dout16.data(), inp16.data(),
                  weight16.data(), kN, kC, kOC, ws);
  // old + fp32 contribution, rounded once: within 1 ulp of the fp32 result
  // (which may itself sit up to an fp32 rounding away from the exact sum).
  expect_bf16_close(dinp16, dinp, 1.0f, "dinp");
  expect_bf16_close(dw16, dw, 1.0f, "dweight");
  expect_bf16_close(db16, db, 1.0f, "dbias");
}

TEST(OpsMatmul, RejectsBadShapes) {
  Workspace ws;
  float x[4] = {};
  EXPECT_THROW(matmul_forward(x, x, x, x, 1, 0, 1, ws), std::invalid_argument);
  EXPECT_THROW(matmul_backward(x, x, x, x, x, x, 1, 1, -1, ws), std::invalid_argument);
}

}  // namespace
}  // namespace srkit::cpu
