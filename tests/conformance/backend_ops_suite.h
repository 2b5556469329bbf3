// The op conformance suite (in the spirit of ggml's test-backend-ops): every op
// and fused entry point of Backend, forward and backward, for fp32 and bf16
// storage, on the backend make_backend(device) returns. Each test
//   - poisons every output with NaN bytes before the call (so an op that skips
//     elements fails), except buffers an op accumulates into;
//   - runs both GradWrite modes of every backward output (grad_write_check.h);
//   - uses odd shapes: T = 13 (not a power of two), V = 50 padded to Vp = 64,
//     C = 20 or 36 (not multiples of the vector width), NH = 1 and NH > 1;
//   - checks the result against an independent host reference: fp64 formulas
//     (reference.h), central finite differences of the backend's own forward
//     (fp32), known answers, and for bf16 the same op in fp32 on the same
//     values (the bf16-vs-fp32 bounds of the op's numerics);
//   - and, when the device is not the CPU, runs the op on a CPU backend too and
//     compares: bit for bit where the design promises it, else within the
//     bounds of tolerances.h.
// Fused entry points must equal the composition of the plain ops on the same
// backend bit for bit. Sizes stay small: the suite also runs under a CPU
// emulation of CUDA.
//
// Instantiate with SRKIT_INSTANTIATE_BACKEND_CONFORMANCE(prefix, "device") (at
// the end of this file), once per test binary.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/adamw.h"
#include "kernels/common/bf16.h"
#include "kernels/common/grad_write.h"
#include "kernels/common/sr_bits.h"
#include "kernels/common/step_record.h"
#include "lib/backend/backend.h"
#include "tests/adamw_element_reference.h"
#include "tests/conformance/backend_grad_dtype_suite.h"
#include "tests/conformance/backend_model_suite.h"
#include "tests/conformance/compare.h"
#include "tests/conformance/device_array.h"
#include "tests/conformance/fixture.h"
#include "tests/conformance/grad_write_check.h"
#include "tests/conformance/reference.h"
#include "tests/conformance/tolerances.h"
#include "tests/test_ops_util.h"

namespace srkit::conformance {
namespace ops_suite {

using srkit::testing::accumulated;
using srkit::testing::AdamWElementByElement;
using srkit::testing::expect_close;
using srkit::testing::expect_telemetry_eq;
using srkit::testing::random_vec;
using srkit::testing::to_f64;

constexpr GradWrite kOverwrite = GradWrite::kOverwrite;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// Tokens of a [2, 13] batch over a vocabulary of 50: tokens repeat (so dwte
// sums several positions), the last row (49) occurs, and row 7 never does.
constexpr int kEncB = 2, kEncT = 13, kEncC = 20, kEncV = 50, kEncMaxT = 16;
constexpr int kEncAbsentToken = 7;
inline std::vector<int32_t> encoder_tokens() {
  std::vector<int32_t> t(kEncB * kEncT);
  for (size_t p = 0; p < t.size(); ++p) {
    t[p] = int32_t((p * 5 + 3) % 12);
    if (t[p] == kEncAbsentToken) t[p] = kEncV - 1;
  }
  return t;
}

// sum_j out[j] * w[j] per part, where element j belongs to part part_of[j].
inline std::vector<double> part_sums(const std::vector<float>& out, const std::vector<float>& w,
                                     const std::vector<size_t>& part_of, size_t parts) {
  std::vector<double> s(parts, 0.0);
  for (size_t j = 0; j < out.size(); ++j) s[part_of[j]] += double(out[j]) * double(w[j]);
  return s;
}

// ---- encoder --------------------------------------------------------------

TEST_P(BackendOpsDtype, EncoderForward) {
  const auto tokens = encoder_tokens();
  const auto wte = inputs(size_t(kEncV) * kEncC, 1), wpe = inputs(size_t(kEncMaxT) * kEncC, 2);
  auto run = [&](Backend& b) {
    auto tok = upload(b, tokens);
    auto twte = Tensor::of(b, dt(), wte), twpe = Tensor::of(b, dt(), wpe);
    auto out = Tensor::poisoned(b, dt(), size_t(kEncB) * kEncT * kEncC);
    b.encoder_forward(dt(), out.get(), tok.as<int32_t>(), twte.get(), twpe.get(), kEncB, kEncT,
                      kEncC);
    return out.bits();
  };
  const auto got_bits = run(be());
  // Known answer: one fp32 addition of two stored values, rounded once to the
  // storage type: exact.
  std::vector<float> want(size_t(kEncB) * kEncT * kEncC);
  for (int p = 0; p < kEncB * kEncT; ++p) {
    for (int i = 0; i < kEncC; ++i) {
      const float s = wte[size_t(tokens[p]) * kEncC + i] + wpe[size_t(p % kEncT) * kEncC + i];
      want[size_t(p) * kEncC + i] = bf16() ? bf16_to_float(float_to_bf16_rn(s)) : s;
    }
  }
  Tensor expect = Tensor::of(be(), dt(), want);
  EXPECT_TRUE(same_bits(got_bits, expect.bits(), dtype_size(dt())));
  if (Backend* cpu = cpu_reference()) {
    EXPECT_TRUE(same_bits(got_bits, run(*cpu), dtype_size(dt()))) << "bit-exact against the CPU";
  }
}

TEST_P(BackendOpsDtype, EncoderBackwardAccumulates) {
  const auto tokens = encoder_tokens();
  const size_t wte_n = size_t(kEncV) * kEncC, wpe_n = size_t(kEncMaxT) * kEncC;
  const auto dout = inputs(size_t(kEncB) * kEncT * kEncC, 3);
  const auto dwte0 = inputs(wte_n, 4), dwpe0 = inputs(wpe_n, 5);
  struct Out {
    std::vector<float> dwte, dwpe;
    std::vector<uint8_t> dwte_bits, dwpe_bits;
  };
  auto run = [&](Backend& b, DType d, const std::vector<float>& g, const std::vector<float>& old_te,
                 const std::vector<float>& old_pe) {
    auto tok = upload(b, tokens);
    auto tdout = Tensor::of(b, d, g);
    auto dwte = Tensor::of(b, d, old_te), dwpe = Tensor::of(b, d, old_pe);
    b.encoder_backward(d, d, dwte.get(), dwpe.get(), tdout.get(), tokens.data(), kEncB, kEncT,
                       kEncC);
    return Out{dwte.values(), dwpe.values(), dwte.bits(), dwpe.bits()};
  };
  const Out got = run(be(), dt(), dout, dwte0, dwpe0);
  // fp64 reference: old + the sum of dout over the positions of each row.
  const auto g = ref::encoder_backward(dout, tokens, kEncB, kEncT, kEncC, kEncV, kEncMaxT);
  std::vector<double> want_te(wte_n), want_pe(wpe_n);
  for (size_t j = 0; j < wte_n; ++j) want_te[j] = dwte0[j] + g.dwte[j];
  for (size_t j = 0; j < wpe_n; ++j) want_pe[j] = dwpe0[j] + g.dwpe[j];
  // fp32: sums of at most 4 terms of magnitude <= 1, plus the old value.
  const Tolerance tol = plus_storage(dt(), abs_rel(2e-6, 1e-6));
  EXPECT_TRUE(all_within(got.dwte, want_te, tol)) << "dwte";
  EXPECT_TRUE(all_within(got.dwpe, want_pe, tol)) << "dwpe";
  // Rows no position touches keep their values: token 7, positions T..maxT-1.
  for (int i = 0; i < kEncC; ++i) {
    const size_t j = size_t(kEncAbsentToken) * kEncC + i;
    EXPECT_EQ(got.dwte[j], dwte0[j]) << i;
    for (int t = kEncT; t < kEncMaxT; ++t) EXPECT_EQ(got.dwpe[t * kEncC + i], dwpe0[t * kEncC + i]);
  }
  if (!bf16()) {
    // Central differences of the backend's forward. Per-token and per-position
    // partial losses let a whole column of wte (or wpe) move at once. Linear
    // op: the differences are exact up to the loss's fp32 noise.
    auto wte = random_vec(wte_n, 6), wpe = random_vec(wpe_n, 7);
    const auto w = dout;
    auto tok = upload(be(), tokens);
    auto forward = [&]() {
      auto twte = Tensor::of(be(), dt(), wte), twpe = Tensor::of(be(), dt(), wpe);
      auto out = Tensor::poisoned(be(), dt(), size_t(kEncB) * kEncT * kEncC);
      be().encoder_forward(dt(), out.get(), tok.as<int32_t>(), twte.get(), twpe.get(), kEncB, kEncT,
                           kEncC);
      return out.values();
    };
    std::vector<size_t> by_token(w.size()), by_position(w.size());
    for (size_t j = 0; j < w.size(); ++j) {
      by_token[j] = size_t(tokens[j / kEncC]);
      by_position[j] = (j / kEncC) % kEncT;
    }
    const auto fd_te = finite_diff_columns(
        wte, kEncV, kEncC, [](size_t r) { return r; },
        [&] { return part_sums(forward(), w, by_token, kEncV); }, 1e-2f);
    const auto fd_pe = finite_diff_columns(
        wpe, kEncMaxT, kEncC, [](size_t r) { return r; },
        [&] { return part_sums(forward(), w, by_position, kEncMaxT); }, 1e-2f);
    expect_close(accumulated(got.dwte, dwte0), fd_te, 1e-4, 1e-4, "dwte vs finite differences");
    expect_close(accumulated(got.dwpe, dwpe0), fd_pe, 1e-4, 1e-4, "dwpe vs finite differences");
  } else {
    // bf16 against fp32 on the same values, both from zero: the same fp32 sums
    // in position order, rounded once.
    const std::vector<float> z_te(wte_n, 0.0f), z_pe(wpe_n, 0.0f);
    const Out b16 = run(be(), DType::kBF16, dout, z_te, z_pe);
    const Out f32 = run(be(), DType::kF32, dout, z_te, z_pe);
    EXPECT_TRUE(all_within(b16.dwte, f32.dwte, bf16_ulps(0.5))) << "dwte bf16 vs fp32";
    EXPECT_TRUE(all_within(b16.dwpe, f32.dwpe, bf16_ulps(0.5))) << "dwpe bf16 vs fp32";
  }
  if (Backend* cpu = cpu_reference()) {
    const Out want = run(*cpu, dt(), dout, dwte0, dwpe0);
    EXPECT_TRUE(same_bits(got.dwte_bits, want.dwte_bits, dtype_size(dt()))) << "dwte vs CPU";
    EXPECT_TRUE(same_bits(got.dwpe_bits, want.dwpe_bits, dtype_size(dt()))) << "dwpe vs CPU";
  }
}

// ---- layernorm --------------------------------------------------------------

struct LnShape {
  int N, C;
};
constexpr LnShape kLnShapes[] = {{13, 20}, {7, 36}};

inline Tolerance layernorm_vs_cpu(DType dt) {
  return dt == DType::kF32 ? abs_rel(kLayernormF32Abs, kLayernormF32Rel)
                           : bf16_ulps(kLayernormBf16Ulps, kLayernormF32Abs);
}

struct LnForward {
  std::vector<float> out, mean, rstd;
};
inline LnForward layernorm_forward_on(Backend& b, DType dt, const std::vector<float>& inp,
                                      const std::vector<float>& w, const std::vector<float>& bias,
                                      int N, int C) {
  auto x = Tensor::of(b, dt, inp), tw = Tensor::of(b, dt, w), tb = Tensor::of(b, dt, bias);
  auto out = Tensor::poisoned(b, dt, size_t(N) * C);
  auto mean = poisoned<float>(b, N), rstd = poisoned<float>(b, N);
  b.layernorm_forward(dt, out.get(), mean.as<float>(), rstd.as<float>(), x.get(), tw.get(),
                      tb.get(), N, C);
  return {out.values(), download<float>(mean), download<float>(rstd)};
}

TEST_P(BackendOpsDtype, LayernormForwardKnownAnswer) {
  // x = [1,2,3,4]: mean 2.5, variance 1.25.
  const LnForward r =
      layernorm_forward_on(be(), dt(), {1, 2, 3, 4}, {1, 1, 2, 1}, {0, 0, 0, 0.5f}, 1, 4);
  const double s = 1.0 / std::sqrt(1.25 + 1e-5);
  EXPECT_FLOAT_EQ(r.mean[0], 2.5f);
  EXPECT_FLOAT_EQ(r.rstd[0], float(s));
  const std::vector<double> want = {-1.5 * s, -0.5 * s, 2 * 0.5 * s, 1.5 * s + 0.5};
  // fp32: EXPECT_FLOAT_EQ's 4 ulps; bf16: that value rounded once.
  const Tolerance four_ulps = [](size_t, double w) { return std::ldexp(std::fabs(w), -21); };
  EXPECT_TRUE(all_within(r.out, want, plus_storage(dt(), four_ulps)));
}

TEST_P(BackendOpsDtype, LayernormForward) {
  for (const LnShape sh : kLnShapes) {
    SCOPED_TRACE("N=" + std::to_string(sh.N) + " C=" + std::to_string(sh.C));
    const int N = sh.N, C = sh.C;
    const auto inp = inputs(size_t(N) * C, 1, -2.0f, 3.0f), w = inputs(C, 2), bias = inputs(C, 3);
    const LnForward got = layernorm_forward_on(be(), dt(), inp, w, bias, N, C);
    const auto r = ref::layernorm_forward(inp, w, bias, N, C);
    EXPECT_TRUE(all_within(got.mean, r.mean, abs_rel(1e-6, 0.0))) << "mean";
    EXPECT_TRUE(all_within(got.rstd, r.rstd, abs_rel(0.0, 1e-6))) << "rstd";
    EXPECT_TRUE(all_within(got.out, r.out, plus_storage(dt(), abs_rel(2e-6, 0.0)))) << "out";
    if (bf16()) {
      // Same fp32 math on the same values, rounded once (the fp32 reductions
      // may differ in their last bit between the two instantiations' vector code).
      const LnForward f32 = layernorm_forward_on(be(), DType::kF32, inp, w, bias, N, C);
      EXPECT_TRUE(all_within(got.out, f32.out, bf16_ulps(1.0))) << "out bf16 vs fp32";
      EXPECT_TRUE(all_within(got.mean, f32.mean, abs_rel(1e-6, 0.0))) << "mean bf16 vs fp32";
      EXPECT_TRUE(all_within(got.rstd, f32.rstd, abs_rel(0.0, 1e-6))) << "rstd bf16 vs fp32";
    }
    if (Backend* cpu = cpu_reference()) {
      const LnForward want = layernorm_forward_on(*cpu, dt(), inp, w, bias, N, C);
      EXPECT_TRUE(all_within(got.out, want.out, layernorm_vs_cpu(dt()))) << "out vs CPU";
      EXPECT_TRUE(all_within(got.mean, want.mean, abs_rel(kLayernormStatsRel, kLayernormStatsRel)))
          << "mean vs CPU";
      EXPECT_TRUE(all_within(got.rstd, want.rstd, abs_rel(0.0, kLayernormStatsRel)))
          << "rstd vs CPU";
    }
  }
}

TEST_P(BackendOpsDtype, LayernormBackward) {
  const int N = 13, C = 36;
  const auto inp = inputs(size_t(N) * C, 4, -2.0f, 3.0f), w = inputs(C, 5), bias = inputs(C, 6);
  const auto dout = inputs(size_t(N) * C, 7);
  const auto old_dinp = inputs(size_t(N) * C, 8), old_dw = inputs(C, 9), old_db = inputs(C, 10);
  // mean and rstd: what a forward on the same backend saved.
  auto run = [&](Backend& b, DType d, const LnForward& fwd) {
    auto x = Tensor::of(b, d, inp), tw = Tensor::of(b, d, w), g = Tensor::of(b, d, dout);
    auto mean = upload(b, fwd.mean), rstd = upload(b, fwd.rstd);
    const std::vector<GradOutput> outs = {{"dinp", size_t(N) * C, 0, old_dinp},
                                          {"dweight", size_t(C), 1, old_dw},
                                          {"dbias", size_t(C), 1, old_db}};
    return run_grad_write_modes(b, d, outs, 2, [&](const std::vector<GradWrite>& m, auto& o) {
      b.layernorm_backward(d, d, o[0].get(), m[0], o[1].get(), o[2].get(), m[1], g.get(), x.get(),
                           tw.get(), mean.template as<float>(), rstd.template as<float>(), N, C);
    });
  };
  const GradWriteRuns got = run(be(), dt(), layernorm_forward_on(be(), dt(), inp, w, bias, N, C));
  const auto r = ref::layernorm_backward(dout, inp, w, N, C);
  // fp32 against fp64: the fp32 row sums and the saved fp32 statistics, each a
  // few fp32 ulps of values O(1) (rstd ~ 0.7 here).
  const Tolerance tol = plus_storage(dt(), abs_rel(1e-5, 1e-5));
  EXPECT_TRUE(all_within(got.overwritten[0], r.dinp, tol)) << "dinp";
  EXPECT_TRUE(all_within(got.overwritten[1], r.dweight, tol)) << "dweight";
  EXPECT_TRUE(all_within(got.overwritten[2], r.dbias, tol)) << "dbias";
  if (!bf16()) {
    // Central differences of the backend's forward: a column of inp moves at
    // once (rows are independent), all of weight and bias at once (each
    // element feeds one column of out). Curvature is O(rstd^2) ~ 1 here; h =
    // 1e-2 keeps the O(h^2) truncation and the fp32 loss noise (~1e-6 / 2h)
    // both below 1e-4.
    auto x = inp, wv = w, bv = bias;
    auto forward = [&] { return layernorm_forward_on(be(), dt(), x, wv, bv, N, C).out; };
    std::vector<size_t> row_of(size_t(N) * C), col_of(size_t(N) * C), cols(C);
    for (size_t j = 0; j < row_of.size(); ++j) {
      row_of[j] = j / C;
      col_of[j] = j % C;
    }
    for (int i = 0; i < C; ++i) cols[i] = size_t(i);
    const float h = 1e-2f;
    const auto fd_inp = finite_diff_columns(
        x, N, C, [](size_t r) { return r; }, [&] { return part_sums(forward(), dout, row_of, N); },
        h);
    auto by_column = [&] { return part_sums(forward(), dout, col_of, C); };
    const auto fd_w = finite_diff_parts(wv, cols, cols, by_column, h);
    const auto fd_b = finite_diff_parts(bv, cols, cols, by_column, h);
    expect_close(to_f64(got.overwritten[0]), fd_inp, 5e-4, 1e-3, "dinp vs finite differences");
    expect_close(to_f64(got.overwritten[1]), fd_w, 5e-4, 1e-3, "dweight vs finite differences");
    expect_close(to_f64(got.overwritten[2]), fd_b, 5e-4, 1e-3, "dbias vs finite differences");
  } else {
    // bf16 against fp32 from the same saved statistics: the same fp32 math on
    // the same values, rounded once (reductions may differ in their last bit).
    const LnForward stats = layernorm_forward_on(be(), DType::kF32, inp, w, bias, N, C);
    const GradWriteRuns b16 = run(be(), DType::kBF16, stats);
    const GradWriteRuns f32 = run(be(), DType::kF32, stats);
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_TRUE(all_within(b16.overwritten[k], f32.overwritten[k], bf16_ulps(1.0)))
          << "output " << k << " bf16 vs fp32";
    }
  }
  if (Backend* cpu = cpu_reference()) {
    const GradWriteRuns want =
        run(*cpu, dt(), layernorm_forward_on(*cpu, dt(), inp, w, bias, N, C));
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_TRUE(all_within(got.overwritten[k], want.overwritten[k], layernorm_vs_cpu(dt())))
          << "output " << k << " (overwrite) vs CPU";
      EXPECT_TRUE(all_within(got.accumulated[k], want.accumulated[k], layernorm_vs_cpu(dt())))
          << "output " << k << " (accumulate) vs CPU";
    }
  }
}

// ---- matmul -----------------------------------------------------------------

struct MmShape {
  int N, C, OC;
};
// Odd sizes so no dimension is a multiple of a SIMD or BLAS block.
constexpr MmShape kMmShapes[] = {{13, 20, 35}, {7, 13, 11}};

// The bound of a matmul result against the CPU's, per element with magnitude
// sum mag[j] (tolerances.h).
inline Tolerance matmul_vs_cpu(DType dt, const std::vector<double>& mag) {
  const double ulps = dt == DType::kF32 ? 0.0 : kMatmulBf16Ulps;
  return [&mag, ulps](size_t j, double want) {
    return kMatmulF32Rel * mag[j] + ulps * double(bf16_ulp(float(want)));
  };
}

inline std::vector<float> matmul_forward_on(Backend& b, DType dt, const std::vector<float>& inp,
                                            const std::vector<float>& weight,
                                            const std::vector<float>* bias, int N, int C, int OC) {
  auto x = Tensor::of(b, dt, inp), tw = Tensor::of(b, dt, weight);
  Tensor tb = bias ? Tensor::of(b, dt, *bias) : Tensor();
  auto out = Tensor::poisoned(b, dt, size_t(N) * OC);
  b.matmul_forward(dt, out.get(), x.get(), tw.get(), bias ? tb.get() : nullptr, N, C, OC);
  return out.values();
}

TEST_P(BackendOpsDtype, MatmulForwardKnownAnswer) {
  // [[1,2],[3,4]] @ [[1,0],[1,1],[0,2]]^T + [10,20,30] = [[11,23,34],[13,27,38]]
  const std::vector<float> inp = {1, 2, 3, 4}, weight = {1, 0, 1, 1, 0, 2}, bias = {10, 20, 30};
  const auto out = matmul_forward_on(be(), dt(), inp, weight, &bias, 2, 2, 3);
  EXPECT_EQ(out, std::vector<float>({11, 23, 34, 13, 27, 38}));
}

TEST_P(BackendOpsDtype, MatmulForward) {
  for (const MmShape sh : kMmShapes) {
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE("N=" + std::to_string(sh.N) + " C=" + std::to_string(sh.C) +
                   " OC=" + std::to_string(sh.OC) + (with_bias ? " with bias" : " without bias"));
      const int N = sh.N, C = sh.C, OC = sh.OC;
      const auto inp = inputs(size_t(N) * C, 1), weight = inputs(size_t(OC) * C, 2),
                 bias = inputs(OC, 3);
      const std::vector<float>* bp = with_bias ? &bias : nullptr;
      const auto got = matmul_forward_on(be(), dt(), inp, weight, bp, N, C, OC);
      const auto r = ref::matmul_forward(inp, weight, with_bias ? bias.data() : nullptr, N, C, OC);
      // fp32 accumulation of C terms: error well below 1e-6 of the magnitude sum.
      const Tolerance f32 = [&](size_t j, double) { return 1e-6 * r.mag[j]; };
      EXPECT_TRUE(all_within(got, r.out, plus_storage(dt(), f32))) << "out";
      if (bf16()) {
        // Same sgemm on the same values, bias added in fp32, one rounding.
        const auto ref32 = matmul_forward_on(be(), DType::kF32, inp, weight, bp, N, C, OC);
        EXPECT_TRUE(all_within(got, ref32, bf16_ulps(0.5))) << "out bf16 vs fp32";
      }
      if (Backend* cpu = cpu_reference()) {
        const auto want = matmul_forward_on(*cpu, dt(), inp, weight, bp, N, C, OC);
        EXPECT_TRUE(all_within(got, want, matmul_vs_cpu(dt(), r.mag))) << "out vs CPU";
      }
    }
  }
}

TEST_P(BackendOpsDtype, MatmulBackward) {
  const int N = 13, C = 20, OC = 35;
  const auto inp = inputs(size_t(N) * C, 4), weight = inputs(size_t(OC) * C, 5),
             bias = inputs(OC, 6), dout = inputs(size_t(N) * OC, 7);
  const auto old_dinp = inputs(size_t(N) * C, 8), old_dw = inputs(size_t(OC) * C, 9),
             old_db = inputs(OC, 10);
  auto run = [&](Backend& b, DType d, bool with_dbias) {
    auto x = Tensor::of(b, d, inp), tw = Tensor::of(b, d, weight), g = Tensor::of(b, d, dout);
    std::vector<GradOutput> outs = {{"dinp", size_t(N) * C, 0, old_dinp},
                                    {"dweight", size_t(OC) * C, 1, old_dw}};
    if (with_dbias) outs.push_back({"dbias", size_t(OC), 1, old_db});
    return run_grad_write_modes(b, d, outs, 2, [&](const std::vector<GradWrite>& m, auto& o) {
      b.matmul_backward(d, d, o[0].get(), m[0], o[1].get(), with_dbias ? o[2].get() : nullptr, m[1],
                        g.get(), x.get(), tw.get(), N, C, OC);
    });
  };
  const GradWriteRuns got = run(be(), dt(), true);
  const auto r = ref::matmul_backward(dout, inp, weight, N, C, OC);
  const std::vector<const std::vector<double>*> want = {&r.dinp, &r.dweight, &r.dbias},
                                                mag = {&r.dinp_mag, &r.dweight_mag, &r.dbias_mag};
  for (size_t k = 0; k < 3; ++k) {
    const Tolerance f32 = [&](size_t j, double) { return 1e-6 * (*mag[k])[j]; };
    EXPECT_TRUE(all_within(got.overwritten[k], *want[k], plus_storage(dt(), f32)))
        << "output " << k;
  }
  // Without a bias gradient (dbias null) dinp and dweight are the same bits.
  const GradWriteRuns no_bias = run(be(), dt(), false);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_TRUE(same_bits(no_bias.overwritten_bits[k], got.overwritten_bits[k]))
        << "output " << k << " without dbias";
    EXPECT_TRUE(same_bits(no_bias.accumulated_bits[k], got.accumulated_bits[k]))
        << "output " << k << " without dbias (accumulating)";
  }
  if (!bf16()) {
    // Central differences of the backend's forward (with bias). inp[n,c] feeds
    // row n of out, weight[o,c] and bias[o] column o, so a column of inp or of
    // weight (or all of bias) moves at once. Bilinear op: the differences are
    // exact up to fp32 rounding of the loss (~1e-6 / 2h), so the tolerances are tight.
    auto x = inp, wv = weight, bv = bias;
    auto forward = [&] { return matmul_forward_on(be(), dt(), x, wv, &bv, N, C, OC); };
    std::vector<size_t> row_of(size_t(N) * OC), col_of(size_t(N) * OC), all_oc(OC);
    for (size_t j = 0; j < row_of.size(); ++j) {
      row_of[j] = j / OC;
      col_of[j] = j % OC;
    }
    for (int o = 0; o < OC; ++o) all_oc[o] = size_t(o);
    auto by_row = [&] { return part_sums(forward(), dout, row_of, N); };
    auto by_column = [&] { return part_sums(forward(), dout, col_of, OC); };
    const float h = 1e-2f;
    const auto fd_inp = finite_diff_columns(
        x, N, C, [](size_t r) { return r; }, by_row, h);
    const auto fd_w = finite_diff_columns(
        wv, OC, C, [](size_t r) { return r; }, by_column, h);
    const auto fd_b = finite_diff_parts(bv, all_oc, all_oc, by_column, h);
    expect_close(to_f64(got.overwritten[0]), fd_inp, 2e-4, 1e-4, "dinp vs finite differences");
    expect_close(to_f64(got.overwritten[1]), fd_w, 2e-4, 1e-4, "dweight vs finite differences");
    expect_close(to_f64(got.overwritten[2]), fd_b, 2e-4, 1e-4, "dbias vs finite differences");
  } else {
    // Accumulating into the same old values: old + fp32 contribution, rounded
    // once: within 1 ulp of the fp32 result (which may itself sit up to an fp32
    // rounding away from the exact sum).
    const GradWriteRuns f32 = run(be(), DType::kF32, true);
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_TRUE(all_within(got.accumulated[k], f32.accumulated[k], bf16_ulps(1.0)))
          << "output " << k << " bf16 vs fp32 (accumulating)";
    }
  }
  if (Backend* cpu = cpu_reference()) {
    const GradWriteRuns c = run(*cpu, dt(), true);
    const std::vector<const std::vector<float>*> old = {&old_dinp, &old_dw, &old_db};
    for (size_t k = 0; k < 3; ++k) {
      std::vector<double> acc_mag(mag[k]->size());
      for (size_t j = 0; j < acc_mag.size(); ++j) {
        acc_mag[j] = (*mag[k])[j] + std::fabs((*old[k])[j]);
      }
      EXPECT_TRUE(all_within(got.overwritten[k], c.overwritten[k], matmul_vs_cpu(dt(), *mag[k])))
          << "output " << k << " (overwrite) vs CPU";
      EXPECT_TRUE(all_within(got.accumulated[k], c.accumulated[k], matmul_vs_cpu(dt(), acc_mag)))
          << "output " << k << " (accumulate) vs CPU";
    }
  }
}

// ---- attention ----------------------------------------------------------------

struct AttShape {
  int B, T, C, NH;
  size_t inp() const { return size_t(B) * T * 3 * C; }
  size_t out() const { return size_t(B) * T * C; }
  std::string str() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
           " NH=" + std::to_string(NH);
  }
};
// NH > 1 with head size 5, NH = 1 with C = 36, and the old tests' 3 heads of 4;
// then shapes of the CUDA backend's flash path for bf16 (head size 64 or 128,
// kernels/cuda/attention_layout.h): NH = 1 at odd T, T not a multiple of the
// 64-row tile with two heads, head size 128, and T = 1000.
constexpr AttShape kAttShapes[] = {{2, 13, 20, 4},  {1, 7, 36, 1},   {2, 5, 12, 3},
                                   {1, 13, 64, 1},  {2, 70, 128, 2}, {1, 20, 128, 1},
                                   {1, 1000, 64, 1}};

// A forward pass whose device buffers a backward can use: state and scratch
// sized by attention_sizes(), poisoned like every output.
struct AttentionRun {
  Tensor inp, out;
  DeviceArray state, scratch;
};
inline AttentionRun attention_forward_on(Backend& b, DType dt, const std::vector<float>& inp,
                                         const AttShape& s) {
  const AttentionSizes sz = b.attention_sizes(dt, s.B, s.T, s.C, s.NH);
  AttentionRun r{Tensor::of(b, dt, inp), Tensor::poisoned(b, dt, s.out()),
                 DeviceArray(b, sz.state_per_layer), DeviceArray()};
  r.state.poison();
  if (sz.scratch > 0) {
    r.scratch = DeviceArray(b, sz.scratch);
    r.scratch.poison();
  }
  b.attention_forward(dt, r.out.get(), r.state.get(), r.scratch.get(), r.inp.get(), s.B, s.T, s.C,
                      s.NH);
  return r;
}

inline Tolerance attention_vs_cpu(DType dt, double max_magnitude) {
  if (dt == DType::kF32) return abs_rel(kAttentionF32Rel * max_magnitude, 0.0);
  return bf16_ulps(1.0, kAttentionBf16Rel * max_magnitude);
}

TEST_P(BackendOpsDtype, AttentionForward) {
  for (const AttShape s : kAttShapes) {
    SCOPED_TRACE(s.str());
    const auto inp = inputs(s.inp(), 1, -2.0f, 2.0f);
    const auto got = attention_forward_on(be(), dt(), inp, s).out.values();
    const auto r = ref::attention_forward(inp, s.B, s.T, s.C, s.NH);
    float vmax = 0.0f;
    for (size_t j = 0; j < inp.size(); ++j) {
      if ((j / s.C) % 3 == 2) vmax = std::max(vmax, std::fabs(inp[j]));
    }
    // fp32: 1e-6. bf16: out sums att * v with each att off by at most the bf16
    // unit roundoff 2^-8 (relative), then rounds once more: error <= 2^-8 *
    // (sum_t2 att |v| + |out|) <= 2^-8 * (max |v| + |out|).
    const Tolerance bf16_bound = [vmax](size_t, double w) {
      return std::ldexp(double(vmax) + std::fabs(w), -8);
    };
    const Tolerance f32_bound = abs_rel(1e-6, 1e-6);
    const Tolerance tol =
        bf16() ? Tolerance([=](size_t j, double w) { return bf16_bound(j, w) + f32_bound(j, w); })
               : f32_bound;
    EXPECT_TRUE(all_within(got, r.out, tol)) << "out";
    // The first query sees only itself: att = 1, out = v exactly.
    for (int b = 0; b < s.B; ++b) {
      for (int i = 0; i < s.C; ++i) {
        EXPECT_EQ(got[size_t(b) * s.T * s.C + i], inp[size_t(b) * s.T * 3 * s.C + 2 * s.C + i])
            << "batch " << b << " channel " << i;
      }
    }
    if (bf16()) {
      const auto f32 = attention_forward_on(be(), DType::kF32, inp, s).out.values();
      EXPECT_TRUE(all_within(got, f32, bf16_bound)) << "out bf16 vs fp32";
    }
    if (Backend* cpu = cpu_reference()) {
      const auto want = attention_forward_on(*cpu, dt(), inp, s).out.values();
      EXPECT_TRUE(all_within(got, want, attention_vs_cpu(dt(), max_abs(want)))) << "out vs CPU";
    }
  }
}

TEST_P(BackendOpsDtype, AttentionBackward) {
  for (size_t shape = 0; shape < std::size(kAttShapes); ++shape) {
    if (shape == 2) continue;  // the old tests' shape: forward only
    const AttShape s = kAttShapes[shape];
    SCOPED_TRACE(s.str());
    const int hs = s.C / s.NH;
    const auto inp = inputs(s.inp(), 2, -2.0f, 2.0f), dout = inputs(s.out(), 3),
               old = inputs(s.inp(), 4);
    auto run = [&](Backend& b, DType d) {
      AttentionRun f = attention_forward_on(b, d, inp, s);
      auto g = Tensor::of(b, d, dout);
      // The scratch is shared by every layer's forward and backward: backward
      // must not expect what forward left there.
      if (f.scratch.get()) f.scratch.poison();
      return run_grad_write_modes(
          b, d, {{"dinp", s.inp(), 0, old}}, 1, [&](const std::vector<GradWrite>& m, auto& o) {
            b.attention_backward(d, o[0].get(), m[0], g.get(), f.inp.get(), f.out.get(),
                                 f.state.get(), f.scratch.get(), s.B, s.T, s.C, s.NH);
          });
    };
    const GradWriteRuns got = run(be(), dt());
    const auto r = ref::attention_backward(dout, inp, s.B, s.T, s.C, s.NH);
    const double scale = max_abs(r);
    // fp32 against fp64: sums over <= T keys of products of O(1) values.
    // bf16: the probabilities are stored and used rounded to bf16 (2^-9
    // relative each), and every input and the result are bf16: 2^-6 of the
    // tensor's largest magnitude, plus the final rounding.
    const Tolerance tol = bf16() ? bf16_ulps(1.0, scale / 64) : abs_rel(1e-5 * scale, 1e-5);
    EXPECT_TRUE(all_within(got.overwritten[0], r, tol)) << "dinp";
    if (!bf16() && shape == 0) {
      // Central differences of the backend's forward: inp[b,t,part,h,i] feeds
      // only batch b, head h of out, so one (t, part, i) moves in every batch and
      // head at once; every fifth (t, part, i) is checked. Smooth in q, k, v
      // with O(1) curvature at |inputs| <= 2: h = 1e-2 leaves truncation and
      // fp32 noise near 1e-5.
      auto x = inp;
      auto forward = [&] { return attention_forward_on(be(), dt(), x, s).out.values(); };
      std::vector<size_t> head_of(s.out());
      for (size_t j = 0; j < head_of.size(); ++j) {
        head_of[j] = (j / (size_t(s.T) * s.C)) * s.NH + (j % s.C) / hs;
      }
      const size_t parts = size_t(s.B) * s.NH;
      std::vector<double> got_sel, fd_sel;
      for (int k = 0; k < s.T * 3 * hs; k += 5) {
        const int t = k / (3 * hs), part = (k / hs) % 3, i = k % hs;
        std::vector<size_t> idx, part_of;
        for (int b = 0; b < s.B; ++b) {
          for (int h = 0; h < s.NH; ++h) {
            idx.push_back((size_t(b) * s.T + t) * 3 * s.C + size_t(part) * s.C + size_t(h) * hs +
                          i);
            part_of.push_back(size_t(b) * s.NH + h);
          }
        }
        const auto fd = finite_diff_parts(
            x, idx, part_of, [&] { return part_sums(forward(), dout, head_of, parts); }, 1e-2f);
        for (size_t q = 0; q < idx.size(); ++q) {
          got_sel.push_back(got.overwritten[0][idx[q]]);
          fd_sel.push_back(fd[q]);
        }
      }
      expect_close(got_sel, fd_sel, 5e-4, 1e-3, "dinp vs finite differences");
    }
    if (bf16()) {
      // Against fp32 on the same values: besides the final rounding, the
      // backward differentiates the bf16-rounded probabilities its forward
      // stored (2^-9 relative each), which moves dinp by up to ~2^-7 of the
      // tensor's largest magnitude.
      const GradWriteRuns f32 = run(be(), DType::kF32);
      EXPECT_TRUE(all_within(got.overwritten[0], f32.overwritten[0], bf16_ulps(1.0, scale / 128)))
          << "dinp bf16 vs fp32";
    }
    if (Backend* cpu = cpu_reference()) {
      const GradWriteRuns c = run(*cpu, dt());
      EXPECT_TRUE(all_within(got.overwritten[0], c.overwritten[0],
                             attention_vs_cpu(dt(), max_abs(c.overwritten[0]))))
          << "dinp (overwrite) vs CPU";
      EXPECT_TRUE(all_within(got.accumulated[0], c.accumulated[0],
                             attention_vs_cpu(dt(), max_abs(c.accumulated[0]))))
          << "dinp (accumulate) vs CPU";
    }
  }
}

// ---- GELU and the residual add -----------------------------------------------

inline std::vector<float> gelu_forward_on(Backend& b, DType dt, const std::vector<float>& x) {
  auto in = Tensor::of(b, dt, x);
  auto out = Tensor::poisoned(b, dt, x.size());
  b.gelu_forward(dt, out.get(), in.get(), x.size());
  return out.values();
}

TEST_P(BackendOpsDtype, GeluForward) {
  // Known points first: gelu(0) = 0, gelu(1) = 0.841192 (tanh approximation),
  // and large |x| saturates to x or 0. Then random values.
  auto x = inputs(1003, 1, -5.0f, 5.0f);
  const float known[] = {0.0f, 1.0f, -1.0f, 6.0f, -6.0f};
  const double known_out[] = {0.0, 0.8411920, -0.1588080, 6.0, 0.0};
  for (size_t k = 0; k < 5; ++k) x[k] = known[k];
  const auto got = gelu_forward_on(be(), dt(), x);
  EXPECT_EQ(got[0], 0.0f);
  for (size_t k = 1; k < 5; ++k) {
    EXPECT_NEAR(got[k], known_out[k], 1e-6 + (bf16() ? bf16_ulp(float(known_out[k])) : 0.0f))
        << "gelu(" << x[k] << ")";
  }
  std::vector<double> r(x.size());
  for (size_t j = 0; j < x.size(); ++j) r[j] = ref::gelu(x[j]);
  const Tolerance f32 = [&](size_t j, double) { return 1e-6 * (1.0 + std::fabs(x[j])); };
  EXPECT_TRUE(all_within(got, r, plus_storage(dt(), f32))) << "out";
  if (bf16()) {
    EXPECT_TRUE(all_within(got, gelu_forward_on(be(), DType::kF32, x), bf16_ulps(0.5)))
        << "bf16 is fp32 rounded";
  }
  if (Backend* cpu = cpu_reference()) {
    EXPECT_TRUE(same_bits(float_bytes(got), float_bytes(gelu_forward_on(*cpu, dt(), x)), 4))
        << "bit-exact against the CPU";
  }
}

TEST_P(BackendOpsDtype, GeluBackward) {
  const size_t n = 203;
  const auto x = inputs(n, 2, -4.0f, 4.0f), dout = inputs(n, 3), old = inputs(n, 4);
  auto run = [&](Backend& b, DType d) {
    auto in = Tensor::of(b, d, x), g = Tensor::of(b, d, dout);
    return run_grad_write_modes(b, d, {{"dinp", n, 0, old}}, 1,
                                [&](const std::vector<GradWrite>& m, auto& o) {
                                  b.gelu_backward(d, o[0].get(), m[0], in.get(), g.get(), n);
                                });
  };
  const GradWriteRuns got = run(be(), dt());
  std::vector<double> r(n);
  for (size_t j = 0; j < n; ++j) r[j] = ref::gelu_grad(x[j]) * dout[j];
  // fp32 gelu' from the shared exp (2 ulp) and a few roundings: ~1e-6 relative.
  EXPECT_TRUE(all_within(got.overwritten[0], r, plus_storage(dt(), abs_rel(1e-6, 1e-5)))) << "dinp";
  if (!bf16()) {
    // Central differences of the backend's forward, every element at once
    // (element-wise op). |gelu'''| <= ~2, so h = 1e-2 gives truncation below 4e-5.
    auto xv = x;
    std::vector<size_t> all(n);
    for (size_t j = 0; j < n; ++j) all[j] = j;
    const auto fd = finite_diff_parts(
        xv, all, all, [&] { return part_sums(gelu_forward_on(be(), dt(), xv), dout, all, n); },
        1e-2f);
    expect_close(to_f64(got.overwritten[0]), fd, 2e-4, 1e-3, "dinp vs finite differences");
  } else {
    // Accumulating into the same old values: the same fp32 math, rounded once.
    EXPECT_TRUE(
        all_within(got.accumulated[0], run(be(), DType::kF32).accumulated[0], bf16_ulps(0.5)))
        << "dinp bf16 vs fp32 (accumulating)";
  }
  if (Backend* cpu = cpu_reference()) {
    const GradWriteRuns c = run(*cpu, dt());
    EXPECT_TRUE(same_bits(got.overwritten_bits[0], c.overwritten_bits[0], dtype_size(dt())))
        << "overwrite: bit-exact against the CPU";
    EXPECT_TRUE(same_bits(got.accumulated_bits[0], c.accumulated_bits[0], dtype_size(dt())))
        << "accumulate: bit-exact against the CPU";
  }
}

TEST_P(BackendOpsDtype, ResidualForward) {
  for (size_t n : {size_t(37), size_t(1003)}) {
    const auto a = inputs(n, 1), bv = inputs(n, 2);
    auto run = [&](Backend& b) {
      auto ta = Tensor::of(b, dt(), a), tb = Tensor::of(b, dt(), bv);
      auto out = Tensor::poisoned(b, dt(), n);
      b.residual_forward(dt(), out.get(), ta.get(), tb.get(), n);
      return out.bits();
    };
    const auto got = run(be());
    // One fp32 addition, rounded once to the storage type: exact.
    std::vector<float> want(n);
    for (size_t j = 0; j < n; ++j) want[j] = a[j] + bv[j];
    EXPECT_TRUE(same_bits(got, Tensor::of(be(), dt(), want).bits(), dtype_size(dt()))) << n;
    if (Backend* cpu = cpu_reference()) {
      EXPECT_TRUE(same_bits(got, run(*cpu), dtype_size(dt()))) << "bit-exact against the CPU";
    }
  }
}

// ---- cross-entropy ---------------------------------------------------------------

// N = 26 rows over V = 50 of Vp = 64 columns; rows 5 and 11 are ignored (-1,
// -100), rows 0 and 1 target the first and the last column.
constexpr int kCeN = 26, kCeV = 50, kCeVp = 64;
inline std::vector<int32_t> ce_targets() {
  std::vector<int32_t> t(kCeN);
  for (int n = 0; n < kCeN; ++n) t[n] = (n * 7 + 3) % kCeV;
  t[0] = 0;
  t[1] = kCeV - 1;
  t[5] = -1;
  t[11] = -100;
  return t;
}
constexpr int kCeValidTargets = kCeN - 2;

// Logits of the given precision with NaN in the padding columns: any read of
// them poisons the result.
inline std::vector<float> padded_logits(std::vector<float> l) {
  for (int n = 0; n < kCeN; ++n) {
    for (int v = kCeV; v < kCeVp; ++v) l[size_t(n) * kCeVp + v] = kNaN;
  }
  return l;
}

inline std::vector<float> ce_forward_on(Backend& b, DType dt, const std::vector<float>& logits,
                                        const std::vector<int32_t>& targets, int N, int V, int Vp) {
  auto l = Tensor::of(b, dt, logits);
  auto tg = upload(b, targets);
  auto losses = poisoned<float>(b, N);
  b.crossentropy_forward(dt, losses.as<float>(), l.get(), tg.as<int32_t>(), N, V, Vp);
  return download<float>(losses);
}
// dlogits, out of place (into a poisoned buffer) or in place (over the logits).
inline Tensor ce_backward_on(Backend& b, DType dt, const std::vector<float>& logits,
                             const std::vector<int32_t>& targets, float dloss, bool in_place) {
  auto l = Tensor::of(b, dt, logits);
  auto tg = upload(b, targets);
  if (in_place) {
    b.crossentropy_backward(dt, l.get(), l.get(), tg.as<int32_t>(), dloss, kCeN, kCeV, kCeVp);
    return l;
  }
  auto d = Tensor::poisoned(b, dt, logits.size());
  b.crossentropy_backward(dt, d.get(), l.get(), tg.as<int32_t>(), dloss, kCeN, kCeV, kCeVp);
  return d;
}

TEST_P(BackendOpsDtype, CrossEntropyForward) {
  const auto targets = ce_targets();
  const auto logits = padded_logits(inputs(size_t(kCeN) * kCeVp, 1, -3.0f, 3.0f));
  const auto got = ce_forward_on(be(), dt(), logits, targets, kCeN, kCeV, kCeVp);
  const auto r = ref::crossentropy(logits, targets, 1.0f, kCeN, kCeV, kCeVp);
  // The padding columns' NaN would poison a loss that read them. Ignored rows: 0.
  EXPECT_TRUE(all_within(got, r.losses, abs_rel(1e-6, 0.0))) << "losses";
  EXPECT_EQ(got[5], 0.0f);
  EXPECT_EQ(got[11], 0.0f);
  // Uniform logits: loss = log V exactly in the reference.
  const std::vector<float> flat(kCeVp, 0.5f);
  EXPECT_NEAR(ce_forward_on(be(), dt(), flat, {2}, 1, kCeV, kCeVp)[0], std::log(double(kCeV)),
              1e-6);
  if (bf16()) {
    const auto f32 = ce_forward_on(be(), DType::kF32, logits, targets, kCeN, kCeV, kCeVp);
    EXPECT_TRUE(all_within(got, f32, abs_rel(0.0, 1e-6))) << "losses bf16 vs fp32";
  }
  if (Backend* cpu = cpu_reference()) {
    const auto want = ce_forward_on(*cpu, dt(), logits, targets, kCeN, kCeV, kCeVp);
    EXPECT_TRUE(all_within(got, want, abs_rel(kCrossEntropyLossAbs, 0.0))) << "losses vs CPU";
  }
}

TEST_P(BackendOpsDtype, CrossEntropyBackward) {
  const auto targets = ce_targets();
  const float dloss = 0.7f;
  const auto logits = padded_logits(inputs(size_t(kCeN) * kCeVp, 2, -3.0f, 3.0f));
  const Tensor out = ce_backward_on(be(), dt(), logits, targets, dloss, false);
  const auto got = out.values();
  const auto r = ref::crossentropy(logits, targets, dloss, kCeN, kCeV, kCeVp);
  EXPECT_TRUE(no_nan(got)) << "padding columns (NaN logits) must be written and never read";
  EXPECT_TRUE(all_within(got, r.dlogits, plus_storage(dt(), abs_rel(1e-7, 1e-6)))) << "dlogits";
  for (int n = 0; n < kCeN; ++n) {
    double row_sum = 0.0, rounding = 0.0;
    for (int v = 0; v < kCeVp; ++v) {
      const float g = got[size_t(n) * kCeVp + v];
      if (targets[n] < 0 || v >= kCeV) {
        EXPECT_EQ(g, 0.0f) << "row " << n << " column " << v;
      }
      row_sum += g;
      if (bf16()) rounding += 0.5 * bf16_ulp(g);
    }
    // softmax - onehot sums to 0 over a row (up to each element's rounding).
    EXPECT_NEAR(row_sum, 0.0, 1e-6 + rounding) << "row " << n;
  }
  // In place (dlogits over the logits, as the model does) gives the same bits.
  EXPECT_TRUE(same_bits(ce_backward_on(be(), dt(), logits, targets, dloss, true).bits(), out.bits(),
                        dtype_size(dt())))
      << "in place vs out of place";
  if (!bf16()) {
    // Central differences of the backend's forward; rows are independent, so a
    // whole column moves at once. Padding columns do not enter the loss: their
    // finite differences are 0 too (finite logits there, for the differences).
    auto l = random_vec(size_t(kCeN) * kCeVp, 3, -3.0f, 3.0f);
    const auto d = ce_backward_on(be(), dt(), l, targets, dloss, false).values();
    const auto fd = finite_diff_columns(
        l, kCeN, kCeVp, [](size_t r) { return r; },
        [&] {
          const auto losses = ce_forward_on(be(), dt(), l, targets, kCeN, kCeV, kCeVp);
          std::vector<double> s(kCeN);
          for (int n = 0; n < kCeN; ++n) s[n] = double(dloss) * losses[n];
          return s;
        },
        1e-2f);
    expect_close(to_f64(d), fd, 2e-4, 1e-3, "dlogits vs finite differences");
  } else {
    const auto f32 = ce_backward_on(be(), DType::kF32, logits, targets, 0.5f, false).values();
    const auto b16 = ce_backward_on(be(), DType::kBF16, logits, targets, 0.5f, false).values();
    EXPECT_TRUE(all_within(b16, f32, bf16_ulps(0.5))) << "dlogits bf16 vs fp32";
  }
  if (Backend* cpu = cpu_reference()) {
    const auto want = ce_backward_on(*cpu, dt(), logits, targets, dloss, false).values();
    const Tolerance t =
        bf16() ? bf16_ulps(kCrossEntropyBf16Ulps) : abs_rel(kCrossEntropyGradRel * dloss, 0.0);
    EXPECT_TRUE(all_within(got, want, t)) << "dlogits vs CPU";
  }
}

// A target >= V is the caller's error. The CPU checks its targets on the host
// and throws; a device backend cannot without a host read, so its kernels
// promise instead never to read out of bounds and to treat such a row as
// ignored (loss 0, a zero gradient row). GPT checks targets on the host
// before they reach any backend.
TEST_P(BackendOpsDtype, CrossEntropyTargetsOutsideTheVocabulary) {
  const auto logits = padded_logits(inputs(size_t(kCeN) * kCeVp, 6, -3.0f, 3.0f));
  std::vector<int32_t> bad = ce_targets();
  bad[2] = kCeV;  // a padding column is not a valid target
  auto l = Tensor::of(be(), dt(), logits);
  auto tg = upload(be(), bad);
  auto losses = poisoned<float>(be(), kCeN);
  if (device() == "cpu") {
    EXPECT_THROW(be().crossentropy_forward(dt(), losses.as<float>(), l.get(), tg.as<int32_t>(),
                                           kCeN, kCeV, kCeVp),
                 std::invalid_argument);
    EXPECT_THROW(be().crossentropy_backward(dt(), l.get(), l.get(), tg.as<int32_t>(), 1.0f, kCeN,
                                            kCeV, kCeVp),
                 std::invalid_argument);
    return;
  }
  be().crossentropy_forward(dt(), losses.as<float>(), l.get(), tg.as<int32_t>(), kCeN, kCeV, kCeVp);
  EXPECT_EQ(download<float>(losses)[2], 0.0f) << "the row is ignored";
  be().crossentropy_backward(dt(), l.get(), l.get(), tg.as<int32_t>(), 1.0f, kCeN, kCeV, kCeVp);
  const std::vector<float> d = l.values();
  for (int v = 0; v < kCeVp; ++v) {
    EXPECT_EQ(d[size_t(2) * kCeVp + v], 0.0f) << "column " << v;
  }
}

// ---- fused entry points: the composition of the plain ops, bit for bit ------------

TEST_P(BackendOpsDtype, MatmulBiasGeluIsMatmulThenGelu) {
  const int N = 13, C = 20, OC = 4 * C;
  const size_t n = size_t(N) * OC;
  auto x = Tensor::of(be(), dt(), inputs(size_t(N) * C, 1));
  auto w = Tensor::of(be(), dt(), inputs(size_t(OC) * C, 2));
  auto b = Tensor::of(be(), dt(), inputs(OC, 3));
  auto out = Tensor::poisoned(be(), dt(), n), pre = Tensor::poisoned(be(), dt(), n);
  be().matmul_bias_gelu_forward(dt(), out.get(), pre.get(), x.get(), w.get(), b.get(), N, C, OC);
  auto out2 = Tensor::poisoned(be(), dt(), n), pre2 = Tensor::poisoned(be(), dt(), n);
  be().matmul_forward(dt(), pre2.get(), x.get(), w.get(), b.get(), N, C, OC);
  be().gelu_forward(dt(), out2.get(), pre2.get(), n);
  EXPECT_TRUE(same_bits(pre.bits(), pre2.bits(), dtype_size(dt()))) << "pre";
  EXPECT_TRUE(same_bits(out.bits(), out2.bits(), dtype_size(dt()))) << "out";
  EXPECT_TRUE(no_nan(out.values()));
}

TEST_P(BackendOpsDtype, ResidualLayernormIsResidualThenLayernorm) {
  for (const LnShape sh : kLnShapes) {
    const int N = sh.N, C = sh.C;
    const size_t n = size_t(N) * C;
    auto a = Tensor::of(be(), dt(), inputs(n, 1)), b = Tensor::of(be(), dt(), inputs(n, 2));
    auto w = Tensor::of(be(), dt(), inputs(C, 3)), bias = Tensor::of(be(), dt(), inputs(C, 4));
    auto res = Tensor::poisoned(be(), dt(), n), ln = Tensor::poisoned(be(), dt(), n);
    auto mean = poisoned<float>(be(), N), rstd = poisoned<float>(be(), N);
    be().residual_layernorm_forward(dt(), res.get(), ln.get(), mean.as<float>(), rstd.as<float>(),
                                    a.get(), b.get(), w.get(), bias.get(), N, C);
    auto res2 = Tensor::poisoned(be(), dt(), n), ln2 = Tensor::poisoned(be(), dt(), n);
    auto mean2 = poisoned<float>(be(), N), rstd2 = poisoned<float>(be(), N);
    be().residual_forward(dt(), res2.get(), a.get(), b.get(), n);
    be().layernorm_forward(dt(), ln2.get(), mean2.as<float>(), rstd2.as<float>(), res2.get(),
                           w.get(), bias.get(), N, C);
    EXPECT_TRUE(same_bits(res.bits(), res2.bits(), dtype_size(dt()))) << "residual, C=" << C;
    EXPECT_TRUE(same_bits(ln.bits(), ln2.bits(), dtype_size(dt()))) << "ln, C=" << C;
    EXPECT_TRUE(same_bits(mean.host_bytes(), mean2.host_bytes(), 4)) << "mean, C=" << C;
    EXPECT_TRUE(same_bits(rstd.host_bytes(), rstd2.host_bytes(), 4)) << "rstd, C=" << C;
    EXPECT_TRUE(no_nan(ln.values())) << "C=" << C;
  }
}

TEST_P(BackendOpsDtype, ClassifierIsCrossEntropyForwardThenBackwardInPlace) {
  const auto targets = ce_targets();
  const float dloss = 1.0f / kCeValidTargets;  // as the model passes it
  const auto logits = padded_logits(inputs(size_t(kCeN) * kCeVp, 4, -3.0f, 3.0f));
  auto tg = upload(be(), targets);
  auto l = Tensor::of(be(), dt(), logits);
  auto losses = poisoned<float>(be(), kCeN);
  be().classifier(dt(), l.get(), losses.as<float>(), tg.as<int32_t>(), dloss, kCeN, kCeV, kCeVp);
  auto l2 = Tensor::of(be(), dt(), logits);
  auto losses2 = poisoned<float>(be(), kCeN);
  be().crossentropy_forward(dt(), losses2.as<float>(), l2.get(), tg.as<int32_t>(), kCeN, kCeV,
                            kCeVp);
  be().crossentropy_backward(dt(), l2.get(), l2.get(), tg.as<int32_t>(), dloss, kCeN, kCeV, kCeVp);
  EXPECT_TRUE(same_bits(losses.host_bytes(), losses2.host_bytes(), 4)) << "losses";
  EXPECT_TRUE(same_bits(l.bits(), l2.bits(), dtype_size(dt()))) << "dlogits";
  EXPECT_TRUE(no_nan(l.values())) << "the padding columns' NaN logits must be overwritten";
}

// ---- sum of squares -----------------------------------------------------------------

TEST_P(BackendOpsDtype, SumSquares) {
  // sum_squares of x[offset..] (n = 0 when x is empty), into a poisoned double.
  auto run = [&](Backend& b, const std::vector<float>& x, size_t offset) {
    auto t = Tensor::of(b, dt(), x.empty() ? std::vector<float>{1.0f} : x);
    auto out = poisoned<double>(b, 1);
    b.sum_squares(dt(), t.at(offset), x.empty() ? 0 : x.size() - offset, out.as<double>());
    return download<double>(out)[0];
  };
  EXPECT_EQ(run(be(), {}, 0), 0.0);
  EXPECT_EQ(run(be(), {3.0f, 4.0f}, 0), 25.0);
  // Past one 64K chunk, ending mid-chunk; and the same from an odd offset.
  const auto x = inputs(65536 + 123, 3, -2.0f, 2.0f);
  for (size_t offset : {size_t(0), size_t(1)}) {
    double want = 0.0;
    for (size_t j = offset; j < x.size(); ++j) want += double(x[j]) * x[j];
    const double got = run(be(), x, offset);
    EXPECT_NEAR(got, want, 1e-12 * want) << "offset " << offset;
    if (Backend* cpu = cpu_reference()) {
      const double c = run(*cpu, x, offset);
      EXPECT_NEAR(got, c, kReductionRel * c) << "vs CPU, offset " << offset;
    }
  }
}

// ---- bad shapes ------------------------------------------------------------------------

TEST_P(BackendOpsDtype, RejectsBadShapes) {
  DeviceArray buf(be(), 4096);
  void* x = buf.get();
  float* f = buf.as<float>();
  const int32_t* tok = buf.as<int32_t>();
  const DType d = dt();
  EXPECT_THROW(be().encoder_forward(d, x, tok, x, x, 0, 2, 4), std::invalid_argument);
  EXPECT_THROW(be().encoder_backward(d, d, x, x, x, tok, 1, 0, 4), std::invalid_argument);
  EXPECT_THROW(be().layernorm_forward(d, x, f, f, x, x, x, 0, 4), std::invalid_argument);
  EXPECT_THROW(be().layernorm_backward(d, d, x, kOverwrite, x, x, kOverwrite, x, x, x, f, f, 1, -4),
               std::invalid_argument);
  EXPECT_THROW(be().matmul_forward(d, x, x, x, x, 1, 0, 1), std::invalid_argument);
  EXPECT_THROW(be().matmul_backward(d, d, x, kOverwrite, x, x, kOverwrite, x, x, x, 1, 1, -1),
               std::invalid_argument);
  // Heads must divide the channels.
  EXPECT_THROW(be().attention_forward(d, x, x, nullptr, x, 1, 2, 10, 3), std::invalid_argument);
  EXPECT_THROW(be().attention_backward(d, x, kOverwrite, x, x, x, x, nullptr, 1, 2, 10, 4),
               std::invalid_argument);
  // V must not exceed Vp.
  EXPECT_THROW(be().crossentropy_forward(d, f, x, tok, 1, 9, 8), std::invalid_argument);
  EXPECT_THROW(be().crossentropy_backward(d, x, x, tok, 1.0f, 1, 9, 8), std::invalid_argument);
}

// ---- ops without a storage dtype ----------------------------------------------------

TEST_P(BackendOps, ConvertEveryPairOfDtypes) {
  // fp32 -> bf16: known answers of round-to-nearest-even, then random values
  // of many magnitudes against the element rule (kernels/common/bf16.h).
  const std::vector<std::pair<uint32_t, uint16_t>> known = {
      {0x00000000u, 0x0000}, {0x80000000u, 0x8000},  // +-0
      {0x3f800000u, 0x3f80},                         // 1
      {0x3f808000u, 0x3f80},                         // 1 + 2^-8: a tie, to the even 1
      {0x3f818000u, 0x3f82},                         // 1 + 3 * 2^-8: a tie, to the even 1 + 2^-6
      {0x3f808001u, 0x3f81},                         // just above a tie
      {0x3f807fffu, 0x3f80},                         // just below a tie
      {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80},  // +-Inf
      {0x7f800001u, 0x7fc0},  // signalling NaN, payload in the low half only: quiet NaN
      {0xffc00000u, 0xffc0},  // negative quiet NaN
      {0x7f7fffffu, 0x7f80},  // the largest float overflows to Inf
      {0x7f7f7fffu, 0x7f7f},  // below the midpoint: the largest finite bf16
      {0x00000001u, 0x0000},  // the smallest subnormal rounds to 0
      {0x00018000u, 0x0002},  // a subnormal tie, to even
      {0x807fffffu, 0x8080},  // the largest negative subnormal rounds to -2^-126
  };
  std::vector<float> f32;
  for (const auto& [in, out] : known) f32.push_back(bits_as_float(in));
  for (int e = -30; e <= 30; e += 3) {
    for (float x : random_vec(50, 100 + e)) f32.push_back(std::ldexp(x, e));
  }
  const size_t n = f32.size();
  std::vector<bf16> want16(n);
  for (size_t j = 0; j < n; ++j) want16[j] = float_to_bf16_rn(f32[j]);
  for (size_t k = 0; k < known.size(); ++k) ASSERT_EQ(want16[k].bits, known[k].second) << k;
  // bf16 -> fp32: every bf16 pattern widens exactly (NaN payloads included).
  std::vector<uint16_t> all16(65536);
  for (size_t j = 0; j < all16.size(); ++j) all16[j] = uint16_t(j);
  std::vector<uint32_t> want32(all16.size());
  for (size_t j = 0; j < all16.size(); ++j) want32[j] = uint32_t(all16[j]) << 16;

  // Each conversion writes n elements into a poisoned buffer 3 elements longer:
  // the tail must stay poisoned.
  auto convert = [](Backend& b, DType to, DType from, const void* host, size_t count) {
    DeviceArray src(b, count * dtype_size(from));
    src.write(host, count * dtype_size(from));
    DeviceArray dst = poisoned<uint8_t>(b, (count + 3) * dtype_size(to));
    b.convert(to, dst.get(), from, src.get(), count);
    return dst.host_bytes();
  };
  auto expect_result = [&](const std::vector<uint8_t>& got, const void* want, size_t count,
                           size_t es, const char* what) {
    const auto* w = static_cast<const uint8_t*>(want);
    EXPECT_TRUE(same_bits(std::vector<uint8_t>(got.begin(), got.begin() + count * es),
                          std::vector<uint8_t>(w, w + count * es), es))
        << what;
    EXPECT_TRUE(same_bits(std::vector<uint8_t>(got.begin() + count * es, got.end()),
                          std::vector<uint8_t>(3 * es, kPoisonByte)))
        << what << ": wrote past n";
  };
  for (Backend* b : backends()) {
    SCOPED_TRACE(b == &be() ? "backend under test" : "CPU reference");
    expect_result(convert(*b, DType::kBF16, DType::kF32, f32.data(), n), want16.data(), n, 2,
                  "f32 -> bf16");
    expect_result(convert(*b, DType::kF32, DType::kBF16, all16.data(), all16.size()), want32.data(),
                  all16.size(), 4, "bf16 -> f32");
    // Same dtype: a copy, NaN payloads included.
    expect_result(convert(*b, DType::kF32, DType::kF32, f32.data(), n), f32.data(), n, 4,
                  "f32 -> f32");
    expect_result(convert(*b, DType::kBF16, DType::kBF16, all16.data(), all16.size()), all16.data(),
                  all16.size(), 2, "bf16 -> bf16");
  }
}

TEST_P(BackendOps, AllocationsAreZeroed) {
  for (size_t bytes : {size_t(1), size_t(4099), size_t(1) << 16}) {
    {
      DeviceArray a(be(), bytes);
      EXPECT_TRUE(same_bits(a.host_bytes(), std::vector<uint8_t>(bytes, 0))) << bytes;
      a.poison();
    }
    // Memory handed back and allocated again is zeroed again.
    DeviceArray b(be(), bytes);
    EXPECT_TRUE(same_bits(b.host_bytes(), std::vector<uint8_t>(bytes, 0))) << bytes << " reused";
  }
}

TEST_P(BackendOps, CopiesAndFillZero) {
  const size_t n = 1001;
  std::vector<uint8_t> data(n);
  for (size_t j = 0; j < n; ++j) data[j] = uint8_t(j * 37 + 11);
  // copy_to_device / copy_to_host: whole arrays of odd sizes, and ranges at odd offsets.
  for (size_t bytes : {size_t(1), size_t(3), n}) {
    DeviceArray a(be(), bytes);
    a.write(data.data(), bytes);
    EXPECT_TRUE(same_bits(a.host_bytes(), std::vector<uint8_t>(data.begin(), data.begin() + bytes)))
        << bytes;
  }
  DeviceArray a = poisoned<uint8_t>(be(), n);
  a.write(data.data() + 5, 100, 3);  // bytes [3, 103) only
  std::vector<uint8_t> want(n, kPoisonByte);
  std::copy(data.begin() + 5, data.begin() + 105, want.begin() + 3);
  EXPECT_TRUE(same_bits(a.host_bytes(), want)) << "copy_to_device of a range";
  std::vector<uint8_t> part(50);
  a.read(part.data(), 50, 7);
  EXPECT_TRUE(same_bits(part, std::vector<uint8_t>(want.begin() + 7, want.begin() + 57)))
      << "copy_to_host of a range";
  // copy: device to device, a range at odd offsets; the rest of dst untouched.
  DeviceArray src = upload(be(), data), dst = poisoned<uint8_t>(be(), n);
  be().copy(dst.at(3), src.at(5), 990);
  want.assign(n, kPoisonByte);
  std::copy(data.begin() + 5, data.begin() + 995, want.begin() + 3);
  EXPECT_TRUE(same_bits(dst.host_bytes(), want)) << "copy";
  // fill_zero: a range at an odd offset; the rest untouched.
  be().fill_zero(dst.at(7), 501);
  std::fill(want.begin() + 7, want.begin() + 508, 0);
  EXPECT_TRUE(same_bits(dst.host_bytes(), want)) << "fill_zero";
  // Both dtypes' zero is all-zero bytes: a whole poisoned tensor reads as +0.
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Tensor t = Tensor::poisoned(be(), dt, 333);
    be().fill_zero(t.get(), 333 * dtype_size(dt));
    for (float x : t.values()) ASSERT_EQ(float_as_bits(x), 0u) << dtype_name(dt);
  }
}

TEST_P(BackendOps, MeanLoss) {
  auto run = [](Backend& b, const std::vector<float>& losses, const std::vector<int32_t>& targets,
                int count) {
    auto l = upload(b, losses);
    auto t = upload(b, targets);
    auto out = poisoned<double>(b, 1);
    b.mean_loss(l.as<float>(), t.as<int32_t>(), int(losses.size()), count, out.as<double>());
    return download<double>(out)[0];
  };
  // Known answer: rows whose target is < 0 are left out; the sum is divided by count.
  EXPECT_EQ(run(be(), {1, 2, 3, 4}, {0, -1, 1, 2}, 3), 8.0 / 3.0);
  EXPECT_EQ(run(be(), {1, 2, 3, 4}, {0, -1, 1, 2}, 4), 2.0);
  // 26 rows, 2 ignored; an ignored row's loss is garbage the op must not add.
  const auto targets = ce_targets();
  auto losses = random_vec(kCeN, 5, 0.0f, 5.0f);
  double sum = 0.0;
  for (int i = 0; i < kCeN; ++i) {
    if (targets[i] < 0) {
      losses[i] = 1e30f;
    } else {
      sum += losses[i];
    }
  }
  const double want = sum / kCeValidTargets;
  const double got = run(be(), losses, targets, kCeValidTargets);
  EXPECT_NEAR(got, want, kReductionRel * want);
  if (Backend* cpu = cpu_reference()) {
    const double c = run(*cpu, losses, targets, kCeValidTargets);
    EXPECT_NEAR(got, c, kReductionRel * c) << "vs CPU";
  }
}

TEST_P(BackendOps, GradClip) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // Two ranks of three micro-batches: [signal, sum of squares, loss 0, 1, 2] each.
  const std::vector<double> base = {0, 3.0, 1.5, 2.5, 3.5, 0, 6.0, 1.25, 2.25, 3.25};
  auto with = [&](size_t i, double v) {
    auto r = base;
    r[i] = v;
    return r;
  };
  struct Case {
    const char* what;
    std::vector<double> records;
    int world, accum;
    float max_norm;
    double norm;  // expected, hand-computed
    float scale;
    int32_t ok;
  };
  const Case cases[] = {
      {"norm 3 clipped to 1.5", base, 2, 3, 1.5f, 3.0, 0.5f, 1},
      {"norm below max_norm", base, 2, 3, 10.0f, 3.0, 1.0f, 1},
      {"max_norm 0: clipping off", base, 2, 3, 0.0f, 3.0, 1.0f, 1},
      {"negative max_norm: clipping off", base, 2, 3, -1.0f, 3.0, 1.0f, 1},
      {"a stop signal does not change the clip", with(5, 1.0), 2, 3, 1.5f, 3.0, 0.5f, 1},
      {"a NaN loss (rank 1, micro-batch 2)", with(9, nan), 2, 3, 1.5f, 3.0, 0.5f, 0},
      {"an infinite loss (rank 0, micro-batch 0)", with(2, -inf), 2, 3, 1.5f, 3.0, 0.5f, 0},
      {"an infinite sum of squares", with(6, inf), 2, 3, 1.5f, inf, 0.0f, 0},
      {"a NaN sum of squares", with(1, nan), 2, 3, 1.5f, nan, 1.0f, 0},
      {"one rank, one micro-batch",
       {0, 2.0, 0.75},
       1,
       1,
       1.0f,
       std::sqrt(2.0),
       float(1.0 / std::sqrt(2.0)),
       1},
  };
  auto run = [](Backend& b, const Case& c) {
    auto rec = upload(b, c.records);
    auto out = poisoned<GradClip>(b, 1);
    b.grad_clip(rec.as<double>(), c.world, c.accum, c.max_norm, out.as<GradClip>());
    return out.host_bytes();
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::vector<uint8_t> got_bytes = run(be(), c);
    GradClip got;
    std::memcpy(&got, got_bytes.data(), sizeof got);
    if (std::isnan(c.norm)) {
      EXPECT_TRUE(std::isnan(got.norm));
    } else {
      EXPECT_EQ(got.norm, c.norm);
    }
    EXPECT_EQ(got.scale, c.scale);
    EXPECT_EQ(got.ok, c.ok);
    EXPECT_EQ(got.pad_, 0) << "every byte of the record is defined";
    // The one body both devices run (kernels/common/step_record.h), bit for bit.
    const GradClip want = grad_clip_from_records(c.records.data(), c.world, c.accum, c.max_norm);
    std::vector<uint8_t> want_bytes(sizeof want);
    std::memcpy(want_bytes.data(), &want, sizeof want);
    EXPECT_TRUE(same_bits(got_bytes, want_bytes)) << "against grad_clip_from_records";
    if (Backend* cpu = cpu_reference()) {
      EXPECT_TRUE(same_bits(got_bytes, run(*cpu, c))) << "bit-exact against the CPU";
    }
  }
}

TEST_P(BackendOps, Gather) {
  const size_t src_n = 100, n = 37;
  std::vector<uint64_t> indices(n);
  for (size_t j = 0; j < n; ++j) indices[j] = j % 5 == 0 ? 99 : (j * 37 + 11) % src_n;  // repeats
  for (size_t es : {size_t(2), size_t(4), size_t(6), size_t(8)}) {
    SCOPED_TRACE("element bytes " + std::to_string(es));
    std::vector<uint8_t> src(src_n * es);
    for (size_t j = 0; j < src.size(); ++j) src[j] = uint8_t(j * 131 + es);
    // n elements into a poisoned buffer 3 elements longer: the tail stays.
    std::vector<uint8_t> want((n + 3) * es, kPoisonByte);
    for (size_t j = 0; j < n; ++j) {
      std::memcpy(&want[j * es], &src[indices[j] * es], es);
    }
    auto run = [&](Backend& b) {
      auto s = upload(b, src);
      auto idx = upload(b, indices);
      auto dst = poisoned<uint8_t>(b, (n + 3) * es);
      b.gather(dst.get(), s.get(), es, idx.as<uint64_t>(), n);
      return dst.host_bytes();
    };
    const auto got = run(be());
    EXPECT_TRUE(same_bits(got, want, es));
    if (Backend* cpu = cpu_reference()) {
      EXPECT_TRUE(same_bits(got, run(*cpu), es)) << "bit-exact against the CPU";
    }
  }
}

// ---- AdamW ------------------------------------------------------------------------------

// The six arrays of a rule (weights, grads, master, m, v, kahan) as host bytes,
// empty where the rule has none.
struct AdamWHostArrays {
  AdamWHostArrays(const AdamWRule& r, size_t n) : rule(r), n(n) {
    const AdamWArrayBytes b = adamw_array_bytes(r);
    const size_t es[6] = {b.weights, b.grads, b.master, b.m, b.v, b.kahan};
    for (size_t k = 0; k < 6; ++k) a[k].resize(es[k] * n);
  }
  static void store(std::vector<uint8_t>& buf, DType t, size_t i, float x) {
    if (t == DType::kF32) {
      std::memcpy(buf.data() + 4 * i, &x, 4);
    } else {
      const bf16 h = float_to_bf16_rn(x);
      std::memcpy(buf.data() + 2 * i, &h, 2);
    }
  }
  // GPT-like values: weights around 0 and 1 (gains), some zero gradients.
  void randomize(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t i = 0; i < n; ++i) {
      const float w = (i % 5 == 0 ? 1.0f : 0.0f) + 0.05f * normal(rng);
      if (rule.master == MasterKind::kF32) {
        store(a[2], DType::kF32, i, w);
        store(a[0], DType::kBF16, i, w);
      } else if (rule.master == MasterKind::kRem16) {
        const Rem16 s = rem16_split(w);
        std::memcpy(a[0].data() + 2 * i, &s.w, 2);
        std::memcpy(a[2].data() + 2 * i, &s.r, 2);
      } else {
        store(a[0], rule.weights, i, w);
      }
      store(a[3], rule.m, i, 1e-3f * normal(rng));
      const float s = 1e-2f * normal(rng);
      store(a[4], rule.v, i, s * s);
      if (rule.kahan) store(a[5], DType::kBF16, i, 1e-5f * normal(rng));
    }
    new_grads(seed + 1);
  }
  void new_grads(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1e-2f);
    for (size_t i = 0; i < n; ++i) store(a[1], rule.grads, i, i % 11 == 0 ? 0.0f : normal(rng));
  }
  AdamWBuffers buffers() {
    auto p = [](std::vector<uint8_t>& v) -> void* { return v.empty() ? nullptr : v.data(); };
    return {p(a[0]), p(a[1]), p(a[2]), p(a[3]), p(a[4]), p(a[5])};
  }

  AdamWRule rule;
  size_t n;
  std::array<std::vector<uint8_t>, 6> a;
};
inline const char* kAdamWArrayNames[6] = {"weights", "grads", "master", "m", "v", "kahan"};

// The same arrays on a backend.
struct AdamWDeviceArrays {
  AdamWDeviceArrays(Backend& b, const AdamWHostArrays& h) {
    for (size_t k = 0; k < 6; ++k) {
      if (!h.a[k].empty()) d[k] = upload(b, h.a[k]);
    }
  }
  void upload_grads(const AdamWHostArrays& h) { d[1].write(h.a[1].data(), h.a[1].size()); }
  AdamWBuffers buffers() const {
    return {d[0].get(), d[1].get(), d[2].get(), d[3].get(), d[4].get(), d[5].get()};
  }
  std::array<std::vector<uint8_t>, 6> host() const {
    std::array<std::vector<uint8_t>, 6> out;
    for (size_t k = 0; k < 6; ++k) {
      if (d[k].get()) out[k] = d[k].host_bytes();
    }
    return out;
  }
  std::array<DeviceArray, 6> d;
};

// Three segments with odd boundaries: decay, no decay, decay.
inline std::vector<ParamSegment> adamw_segments(size_t n) {
  const size_t a = n / 3 + 5, b = 2 * n / 3 + 1;
  return {{0, a, true}, {a, b - a, false}, {b, n - b, true}};
}

inline AdamWHyper adamw_hyper(uint64_t step, float grad_scale) {
  AdamWHyper h{};
  h.lr = 1e-3f;
  h.beta1 = 0.9f;
  h.beta2 = 0.95f;
  h.eps = 1e-8f;
  h.weight_decay = 0.1f;
  h.bias_correction1 = 1.0f - std::pow(h.beta1, float(step));
  h.bias_correction2 = 1.0f - std::pow(h.beta2, float(step));
  h.grad_scale = grad_scale;
  h.seed = 0x5eed;
  h.step = step;
  return h;
}

TEST_P(BackendAdamW, StepMatchesTheElementRule) {
  const AdamWRule rule = strategy().rule;
  // A shard [13, 3001) of the flat buffer: SR bits follow the global index.
  const size_t total = 3001, begin = 13, n = total - begin;
  const auto segs = adamw_segments(total);
  AdamWHostArrays start(rule, n);
  start.randomize(11);
  // Step 1: no clip, hyper.grad_scale applies. Step 2: a device clip whose
  // scale replaces hyper.grad_scale. Step 3: a clip of scale 1, no telemetry.
  struct Step {
    bool clip;
    float clip_scale;
    bool telemetry;
  };
  const Step steps[3] = {{false, 0.0f, true}, {true, 0.5f, true}, {true, 1.0f, false}};
  const float grad_scale = 0.75f;
  struct Trace {
    std::vector<std::array<std::vector<uint8_t>, 6>> arrays;
    std::vector<AdamWTelemetry> tel;
  };
  auto run = [&](Backend& b) {
    Trace tr;
    AdamWHostArrays host = start;
    AdamWDeviceArrays dev(b, host);
    const auto plan = b.prepare_adamw(segs, begin, total);
    auto tel = poisoned<AdamWTelemetry>(b, 1);
    DeviceArray clip(b, sizeof(GradClip));
    for (uint64_t s = 1; s <= 3; ++s) {
      const Step& st = steps[s - 1];
      if (s > 1) {
        host.new_grads(100 + s);
        dev.upload_grads(host);
      }
      GradClip c{};
      c.norm = 1.0;
      c.scale = st.clip_scale;
      c.ok = 1;
      clip.write(&c, sizeof c);
      tel.poison();
      b.adamw_step(*plan, rule, dev.buffers(), adamw_hyper(s, grad_scale),
                   st.clip ? clip.as<GradClip>() : nullptr,
                   st.telemetry ? tel.as<AdamWTelemetry>() : nullptr);
      tr.arrays.push_back(dev.host());
      tr.tel.push_back(st.telemetry ? download<AdamWTelemetry>(tel)[0] : AdamWTelemetry{});
    }
    return tr;
  };
  const Trace got = run(be());
  // The host reference, step by step.
  AdamWHostArrays host = start;
  for (uint64_t s = 1; s <= 3; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    const Step& st = steps[s - 1];
    if (s > 1) host.new_grads(100 + s);
    const AdamWHyper h = adamw_hyper(s, st.clip ? st.clip_scale : grad_scale);
    AdamWElementByElement ref{host.buffers(), segs, begin, total, h};
    adamw_dispatch(rule, ref);
    for (size_t k = 0; k < 6; ++k) {
      EXPECT_TRUE(same_bits(got.arrays[s - 1][k], host.a[k])) << kAdamWArrayNames[k];
    }
    if (st.telemetry) {
      expect_telemetry_eq(got.tel[s - 1], ref.tel, kTelemetrySumRel, "telemetry");
      EXPECT_GT(got.tel[s - 1].nonzero, 0u);
    }
  }
  if (Backend* cpu = cpu_reference()) {
    const Trace want = run(*cpu);
    for (size_t s = 0; s < 3; ++s) {
      for (size_t k = 0; k < 6; ++k) {
        EXPECT_TRUE(same_bits(got.arrays[s][k], want.arrays[s][k]))
            << kAdamWArrayNames[k] << " after step " << s + 1 << ": bit-exact against the CPU";
      }
      if (steps[s].telemetry)
        expect_telemetry_eq(got.tel[s], want.tel[s], kTelemetrySumRel, "telemetry vs CPU");
    }
  }
}

TEST_P(BackendAdamW, ClipNotOkChangesNothing) {
  const AdamWRule rule = strategy().rule;
  const size_t n = 1001;
  AdamWHostArrays host(rule, n);
  host.randomize(21);
  AdamWDeviceArrays dev(be(), host);
  const auto plan = be().prepare_adamw(adamw_segments(n), 0, n);
  GradClip c{};
  c.norm = std::numeric_limits<double>::quiet_NaN();
  c.scale = 1.0f;
  c.ok = 0;
  auto clip = upload(be(), std::vector<GradClip>{c});
  auto tel = poisoned<AdamWTelemetry>(be(), 1);
  be().adamw_step(*plan, rule, dev.buffers(), adamw_hyper(1, 1.0f), clip.as<GradClip>(),
                  tel.as<AdamWTelemetry>());
  const auto after = dev.host();
  for (size_t k = 0; k < 6; ++k) {
    EXPECT_TRUE(same_bits(after[k], host.a[k])) << kAdamWArrayNames[k] << " changed";
  }
  std::vector<uint8_t> zero(sizeof(AdamWTelemetry), 0);
  EXPECT_TRUE(same_bits(tel.host_bytes(), zero)) << "telemetry of a step that did not run";
}

}  // namespace ops_suite

// The AdamW rules the suite steps (tests/adamw_element_reference.h).
inline const std::vector<std::string>& kAdamWSpecs = srkit::testing::kAdamWRuleSpecs;
// The strategies the whole model trains with: fp32, bf16 with SR, bf16 weights
// over an fp32 master, and bf16 with SR and fp32 gradients.
inline const std::vector<std::string> kModelStrategies = {"fp32", "bf16-sr", "mixed",
                                                          "bf16-sr:g=f32"};

}  // namespace srkit::conformance

// Instantiates every suite of the conformance tests for one device, once per
// test binary, e.g. SRKIT_INSTANTIATE_BACKEND_CONFORMANCE(cuda, "cuda"); test
// names read cuda/BackendOpsDtype.LayernormBackward/bf16.
#define SRKIT_INSTANTIATE_BACKEND_CONFORMANCE(prefix, device)                                \
  namespace srkit::conformance {                                                             \
  INSTANTIATE_TEST_SUITE_P(prefix, BackendOps, ::testing::Values(std::string(device)),       \
                           device_name);                                                     \
  INSTANTIATE_TEST_SUITE_P(prefix, BackendOpsDtype,                                          \
                           ::testing::Combine(::testing::Values(std::string(device)),        \
                                              ::testing::Values(DType::kF32, DType::kBF16)), \
                           dtype_param_name);                                                \
  INSTANTIATE_TEST_SUITE_P(prefix, BackendAdamW,                                             \
                           ::testing::Combine(::testing::Values(std::string(device)),        \
                                              ::testing::ValuesIn(kAdamWSpecs)),             \
                           spec_param_name);                                                 \
  INSTANTIATE_TEST_SUITE_P(prefix, BackendModel,                                             \
                           ::testing::Combine(::testing::Values(std::string(device)),        \
                                              ::testing::ValuesIn(kModelStrategies)),        \
                           spec_param_name);                                                 \
  }                                                                                          \
  static_assert(true)
