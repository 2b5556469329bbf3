// fp32 parameter gradients of bf16 activations (a strategy's g=f32): the
// three backward ops that produce parameter gradients (matmul, layernorm,
// encoder) called with grad_dt = f32 and dt = bf16, on the backend under test.
// For each op, on the same bf16 inputs and old values:
//   - the fp32 gradients match the fp64 reference within fp32 tolerances (a
//     bf16 rounding anywhere on the way would be hundreds of times larger);
//   - rounded to bf16 they are the bf16 gradients (grad_dt = bf16) bit for bit
//     on the CPU, where both come from the same fp32 sums; elsewhere within one
//     bf16 ulp (a GEMM library may pick another algorithm per output type);
//   - the activation gradient (dinp) is the same bits either way;
//   - a device backend's fp32 gradients match the CPU backend's.
// Included by backend_ops_suite.h (one instantiation per device).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "kernels/common/bf16.h"
#include "lib/backend/backend.h"
#include "tests/conformance/compare.h"
#include "tests/conformance/device_array.h"
#include "tests/conformance/fixture.h"
#include "tests/conformance/grad_write_check.h"
#include "tests/conformance/reference.h"
#include "tests/conformance/tolerances.h"
#include "tests/test_ops_util.h"

namespace srkit::conformance {
namespace grad_dtype_suite {

using srkit::testing::bf16_representable;
using srkit::testing::random_vec;

constexpr GradWrite kOverwriteMode = GradWrite::kOverwrite;

inline std::vector<float> bf16_inputs(size_t n, uint64_t seed) {
  return bf16_representable(random_vec(n, seed));
}

// Runs with fp32 (f32) and bf16 (b16) parameter gradients, checked as the header
// says: outputs before first_param are activation gradients, the rest parameter ones.
inline void expect_f32_params_round_to_bf16_ones(const std::string& device,
                                                 const GradWriteRuns& f32, const GradWriteRuns& b16,
                                                 size_t first_param) {
  for (size_t k = 0; k < first_param; ++k) {
    EXPECT_TRUE(same_bits(f32.overwritten_bits[k], b16.overwritten_bits[k], 2))
        << "activation output " << k << " depends on the parameter gradients' dtype";
  }
  for (size_t k = first_param; k < f32.overwritten.size(); ++k) {
    const std::vector<float> rounded = bf16_representable(f32.overwritten[k]);
    if (device == "cpu") {
      EXPECT_TRUE(same_values(rounded, b16.overwritten[k]))
          << "parameter output " << k << ": RN(fp32 gradient) != bf16 gradient";
    } else {
      EXPECT_TRUE(all_within(rounded, b16.overwritten[k], bf16_ulps(1.0)))
          << "parameter output " << k << ": RN(fp32 gradient) vs bf16 gradient";
    }
  }
}

TEST_P(BackendOps, MatmulBackwardStoresFp32ParameterGradientsOfBf16Activations) {
  const int N = 13, C = 20, OC = 35;
  const auto inp = bf16_inputs(size_t(N) * C, 4), weight = bf16_inputs(size_t(OC) * C, 5),
             dout = bf16_inputs(size_t(N) * OC, 7);
  const auto old_dinp = bf16_inputs(size_t(N) * C, 8), old_dw = bf16_inputs(size_t(OC) * C, 9),
             old_db = bf16_inputs(OC, 10);
  auto run = [&](Backend& b, DType grad_dt) {
    const DType d = DType::kBF16;
    auto x = Tensor::of(b, d, inp), tw = Tensor::of(b, d, weight), g = Tensor::of(b, d, dout);
    const bool f32 = grad_dt == DType::kF32;
    const std::vector<GradOutput> outs = {{"dinp", size_t(N) * C, 0, old_dinp},
                                          {"dweight", size_t(OC) * C, 1, old_dw, f32},
                                          {"dbias", size_t(OC), 1, old_db, f32}};
    return run_grad_write_modes(b, d, outs, 2, [&](const std::vector<GradWrite>& m, auto& o) {
      b.matmul_backward(d, grad_dt, o[0].get(), m[0], o[1].get(), o[2].get(), m[1], g.get(),
                        x.get(), tw.get(), N, C, OC);
    });
  };
  const GradWriteRuns f32 = run(be(), DType::kF32), b16 = run(be(), DType::kBF16);
  const auto r = ref::matmul_backward(dout, inp, weight, N, C, OC);
  const std::vector<const std::vector<double>*> want = {&r.dweight, &r.dbias},
                                                mag = {&r.dweight_mag, &r.dbias_mag};
  for (size_t k = 0; k < 2; ++k) {
    const Tolerance tol = [&](size_t j, double) { return 1e-6 * (*mag[k])[j]; };
    EXPECT_TRUE(all_within(f32.overwritten[k + 1], *want[k], tol)) << "parameter output " << k;
  }
  expect_f32_params_round_to_bf16_ones(GetParam(), f32, b16, 1);
  if (Backend* cpu = cpu_reference()) {
    const GradWriteRuns c = run(*cpu, DType::kF32);
    for (size_t k = 0; k < 2; ++k) {
      const Tolerance vs_cpu = [&](size_t j, double) { return kMatmulF32Rel * (*mag[k])[j]; };
      EXPECT_TRUE(all_within(f32.overwritten[k + 1], c.overwritten[k + 1], vs_cpu))
          << "parameter output " << k << " vs CPU";
    }
  }
  // fp32 activations have fp32 parameter gradients only.
  EXPECT_THROW(be().matmul_backward(DType::kF32, DType::kBF16, nullptr, kOverwriteMode, nullptr,
                                    nullptr, kOverwriteMode, nullptr, nullptr, nullptr, N, C, OC),
               std::invalid_argument);
}

TEST_P(BackendOps, LayernormBackwardStoresFp32ParameterGradientsOfBf16Activations) {
  const int N = 13, C = 36;
  const auto inp = bf16_representable(random_vec(size_t(N) * C, 4, -2.0f, 3.0f)),
             w = bf16_inputs(C, 5), bias = bf16_inputs(C, 6), dout = bf16_inputs(size_t(N) * C, 7);
  const auto old_dinp = bf16_inputs(size_t(N) * C, 8), old_dw = bf16_inputs(C, 9),
             old_db = bf16_inputs(C, 10);
  auto run = [&](Backend& b, DType grad_dt) {
    const DType d = DType::kBF16;
    auto x = Tensor::of(b, d, inp), tw = Tensor::of(b, d, w), tb = Tensor::of(b, d, bias),
         g = Tensor::of(b, d, dout);
    auto ln = Tensor::poisoned(b, d, size_t(N) * C);
    auto mean = poisoned<float>(b, N), rstd = poisoned<float>(b, N);
    b.layernorm_forward(d, ln.get(), mean.as<float>(), rstd.as<float>(), x.get(), tw.get(),
                        tb.get(), N, C);
    const bool f32 = grad_dt == DType::kF32;
    const std::vector<GradOutput> outs = {{"dinp", size_t(N) * C, 0, old_dinp},
                                          {"dweight", size_t(C), 1, old_dw, f32},
                                          {"dbias", size_t(C), 1, old_db, f32}};
    return run_grad_write_modes(b, d, outs, 2, [&](const std::vector<GradWrite>& m, auto& o) {
      b.layernorm_backward(d, grad_dt, o[0].get(), m[0], o[1].get(), o[2].get(), m[1], g.get(),
                           x.get(), tw.get(), mean.as<float>(), rstd.as<float>(), N, C);
    });
  };
  const GradWriteRuns f32 = run(be(), DType::kF32), b16 = run(be(), DType::kBF16);
  const auto r = ref::layernorm_backward(dout, inp, w, N, C);
  // The fp32 sums over 13 rows and the saved fp32 statistics (as the fp32 op).
  const Tolerance tol = abs_rel(1e-5, 1e-5);
  EXPECT_TRUE(all_within(f32.overwritten[1], r.dweight, tol)) << "dweight";
  EXPECT_TRUE(all_within(f32.overwritten[2], r.dbias, tol)) << "dbias";
  expect_f32_params_round_to_bf16_ones(GetParam(), f32, b16, 1);
  if (Backend* cpu = cpu_reference()) {
    const GradWriteRuns c = run(*cpu, DType::kF32);
    for (size_t k = 1; k < 3; ++k) {
      EXPECT_TRUE(all_within(f32.overwritten[k], c.overwritten[k],
                             abs_rel(kLayernormF32Abs, kLayernormF32Rel)))
          << "output " << k << " vs CPU";
    }
  }
  EXPECT_THROW(
      be().layernorm_backward(DType::kF32, DType::kBF16, nullptr, kOverwriteMode, nullptr, nullptr,
                              kOverwriteMode, nullptr, nullptr, nullptr, nullptr, nullptr, N, C),
      std::invalid_argument);
}

TEST_P(BackendOps, EncoderBackwardStoresFp32ParameterGradientsOfBf16Activations) {
  constexpr int B = 2, T = 13, C = 20, V = 50, maxT = 16;
  std::vector<int32_t> tokens(B * T);
  for (size_t p = 0; p < tokens.size(); ++p) tokens[p] = int32_t((p * 5 + 3) % 12);  // repeats
  const size_t wte_n = size_t(V) * C, wpe_n = size_t(maxT) * C;
  const auto dout = bf16_inputs(size_t(B) * T * C, 3);
  const auto old_te = bf16_inputs(wte_n, 4), old_pe = bf16_inputs(wpe_n, 5);
  struct Out {
    std::vector<float> dwte, dwpe;
    std::vector<uint8_t> dwte_bits;
  };
  auto run = [&](Backend& b, DType grad_dt) {
    auto tok = upload(b, tokens);
    auto g = Tensor::of(b, DType::kBF16, dout);
    auto te = Tensor::of(b, grad_dt, old_te), pe = Tensor::of(b, grad_dt, old_pe);
    b.encoder_backward(DType::kBF16, grad_dt, te.get(), pe.get(), g.get(), tokens.data(), B, T, C);
    return Out{te.values(), pe.values(), te.bits()};
  };
  const Out f32 = run(be(), DType::kF32), b16 = run(be(), DType::kBF16);
  const auto r = ref::encoder_backward(dout, tokens, B, T, C, V, maxT);
  std::vector<double> want_te(wte_n), want_pe(wpe_n);
  for (size_t j = 0; j < wte_n; ++j) want_te[j] = old_te[j] + r.dwte[j];
  for (size_t j = 0; j < wpe_n; ++j) want_pe[j] = old_pe[j] + r.dwpe[j];
  // Sums of at most 4 terms of magnitude <= 1 plus the old value, in fp32.
  const Tolerance tol = abs_rel(2e-6, 1e-6);
  EXPECT_TRUE(all_within(f32.dwte, want_te, tol)) << "dwte";
  EXPECT_TRUE(all_within(f32.dwpe, want_pe, tol)) << "dwpe";
  // The same fp32 sums, then one rounding or none: bit for bit on every device
  // (the embedding backward has one summation order, CPU and CUDA alike).
  EXPECT_TRUE(same_values(bf16_representable(f32.dwte), b16.dwte)) << "RN(fp32 dwte) vs bf16 dwte";
  EXPECT_TRUE(same_values(bf16_representable(f32.dwpe), b16.dwpe)) << "RN(fp32 dwpe) vs bf16 dwpe";
  if (Backend* cpu = cpu_reference()) {
    const Out c = run(*cpu, DType::kF32);
    EXPECT_TRUE(same_bits(f32.dwte_bits, c.dwte_bits, 4)) << "dwte vs CPU";
  }
  EXPECT_THROW(be().encoder_backward(DType::kF32, DType::kBF16, nullptr, nullptr, nullptr,
                                     tokens.data(), B, T, C),
               std::invalid_argument);
}

}  // namespace grad_dtype_suite
}  // namespace srkit::conformance
