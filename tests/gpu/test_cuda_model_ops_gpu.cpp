// The CUDA model ops on the paths the conformance suite's small odd shapes do
// not reach: rows of whole 8-element chunks (the 128-bit load paths of
// LayerNorm and the encoder), GPT-2's vocabulary (V = 50257 of Vp = 50304:
// 1024-thread rows, staged in shared memory where the device allows) and a row
// too wide to stage, row chunks of the LayerNorm parameter gradients holding
// several rows, and the same data at a 16-byte-aligned and a misaligned
// address, which must give the same bits (the kernels add in an order fixed by
// the shape alone; the fused residual + LayerNorm relies on it). Against the
// CPU backend: bit for bit where the design promises it, else the conformance
// suite's tolerances. Skips with the runtime's reason without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/encoder.h"
#include "kernels/cuda/loss.h"
#include "lib/backend/backend.h"
#include "tests/conformance/compare.h"
#include "tests/conformance/device_array.h"
#include "tests/conformance/fixture.h"
#include "tests/conformance/tolerances.h"
#include "tests/test_ops_util.h"

namespace srkit::conformance {
namespace {

// `values` stored from element `offset` of a tensor (offset 1 misaligns every
// row by one element), or an output of n elements there, poisoned.
struct View {
  Tensor t;
  size_t offset = 0;
  void* ptr() const { return t.at(offset); }
  std::vector<float> values() const {
    const std::vector<float> v = t.values();
    return {v.begin() + long(offset), v.end()};
  }
  std::vector<uint8_t> bits() const {
    const std::vector<uint8_t> b = t.bits();
    return {b.begin() + long(offset * dtype_size(t.dtype())), b.end()};
  }
};
View view_of(Backend& b, DType dt, const std::vector<float>& values, size_t offset) {
  std::vector<float> padded(offset, 0.0f);
  padded.insert(padded.end(), values.begin(), values.end());
  return {Tensor::of(b, dt, padded), offset};
}
View poisoned_view(Backend& b, DType dt, size_t n, size_t offset) {
  return {Tensor::poisoned(b, dt, n + offset), offset};
}

class CudaModelOps : public ::testing::TestWithParam<DType>, public BackendUnderTest {
 protected:
  void SetUp() override { open("cuda"); }
  DType dt() const { return GetParam(); }
  std::vector<float> inputs(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) const {
    auto v = srkit::testing::random_vec(n, seed, lo, hi);
    return dt() == DType::kBF16 ? srkit::testing::bf16_representable(std::move(v)) : v;
  }
  Tolerance layernorm_vs_cpu() const {
    return dt() == DType::kF32 ? abs_rel(kLayernormF32Abs, kLayernormF32Rel)
                               : bf16_ulps(kLayernormBf16Ulps, kLayernormF32Abs);
  }
  // A parameter gradient's column c: layernorm_vs_cpu plus kLayernormParamRel
  // of magnitude[c], the column's sum of |term| over the rows.
  Tolerance layernorm_param_vs_cpu(std::vector<double> magnitude) const {
    return [base = layernorm_vs_cpu(), magnitude = std::move(magnitude)](size_t c, double want) {
      return base(c, want) + kLayernormParamRel * magnitude[c];
    };
  }
  void check_classifier(int V, int Vp);
};

struct LnShape {
  int N, C;
};
// 300 rows: the parameter gradients' row chunks hold 2 rows each; C = 768:
// GPT-2's width, 3 chunks a lane; 4000 rows: chunks of 16 rows, 2 a warp of
// the fused backward, and a lane's 9th chunk alone; C = 1032: wider than the
// fused backward takes (the rows read again for the parameter sums).
constexpr LnShape kLnShapes[] = {{300, 64}, {5, 768}, {4000, 72}, {40, 1032}};

struct LnRun {
  std::vector<uint8_t> out, mean, rstd, dinp, dweight, dbias, dinp_acc, dparams_acc;
  std::vector<float> out_v, dinp_v, dweight_v, dbias_v;
};

// Forward, then backward twice (everything overwritten; then everything
// accumulated into old values), every tensor at element `offset`.
LnRun layernorm_on(Backend& b, DType dt, const std::vector<float>& inp, const std::vector<float>& w,
                   const std::vector<float>& bias, const std::vector<float>& dout,
                   const std::vector<float>& old, int N, int C, size_t offset) {
  const size_t n = size_t(N) * C;
  View x = view_of(b, dt, inp, offset), tw = view_of(b, dt, w, offset),
       tb = view_of(b, dt, bias, offset), g = view_of(b, dt, dout, offset);
  View out = poisoned_view(b, dt, n, offset);
  auto mean = poisoned<float>(b, N), rstd = poisoned<float>(b, N);
  b.layernorm_forward(dt, out.ptr(), mean.as<float>(), rstd.as<float>(), x.ptr(), tw.ptr(),
                      tb.ptr(), N, C);
  LnRun r;
  r.out = out.bits();
  r.out_v = out.values();
  r.mean = mean.host_bytes();
  r.rstd = rstd.host_bytes();
  View dx = poisoned_view(b, dt, n, offset), dw = poisoned_view(b, dt, C, offset),
       db = poisoned_view(b, dt, C, offset);
  b.layernorm_backward(dt, dt, dx.ptr(), GradWrite::kOverwrite, dw.ptr(), db.ptr(),
                       GradWrite::kOverwrite, g.ptr(), x.ptr(), tw.ptr(), mean.as<float>(),
                       rstd.as<float>(), N, C);
  r.dinp = dx.bits();
  r.dweight = dw.bits();
  r.dbias = db.bits();
  r.dinp_v = dx.values();
  r.dweight_v = dw.values();
  r.dbias_v = db.values();
  View ax = view_of(b, dt, old, offset);
  View aw = view_of(b, dt, std::vector<float>(old.begin(), old.begin() + C), offset);
  View ab = view_of(b, dt, std::vector<float>(old.begin() + C, old.begin() + 2 * C), offset);
  b.layernorm_backward(dt, dt, ax.ptr(), GradWrite::kAccumulate, aw.ptr(), ab.ptr(),
                       GradWrite::kAccumulate, g.ptr(), x.ptr(), tw.ptr(), mean.as<float>(),
                       rstd.as<float>(), N, C);
  r.dinp_acc = ax.bits();
  r.dparams_acc = aw.bits();
  const std::vector<uint8_t> bias_bits = ab.bits();
  r.dparams_acc.insert(r.dparams_acc.end(), bias_bits.begin(), bias_bits.end());
  return r;
}

TEST_P(CudaModelOps, LayernormRowsOfWholeChunks) {
  for (const LnShape sh : kLnShapes) {
    const int N = sh.N, C = sh.C;
    SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C));
    const size_t n = size_t(N) * C;
    const auto inp = inputs(n, 1, -2.0f, 3.0f), w = inputs(C, 2), bias = inputs(C, 3),
               dout = inputs(n, 4), old = inputs(n, 5);
    const LnRun aligned = layernorm_on(be(), dt(), inp, w, bias, dout, old, N, C, 0);
    const LnRun shifted = layernorm_on(be(), dt(), inp, w, bias, dout, old, N, C, 1);
    const size_t es = dtype_size(dt());
    EXPECT_TRUE(same_bits(shifted.out, aligned.out, es)) << "out: misaligned vs aligned";
    EXPECT_TRUE(same_bits(shifted.mean, aligned.mean, 4)) << "mean: misaligned vs aligned";
    EXPECT_TRUE(same_bits(shifted.rstd, aligned.rstd, 4)) << "rstd: misaligned vs aligned";
    EXPECT_TRUE(same_bits(shifted.dinp, aligned.dinp, es)) << "dinp: misaligned vs aligned";
    EXPECT_TRUE(same_bits(shifted.dweight, aligned.dweight, es)) << "dweight: misaligned";
    EXPECT_TRUE(same_bits(shifted.dbias, aligned.dbias, es)) << "dbias: misaligned";
    EXPECT_TRUE(same_bits(shifted.dinp_acc, aligned.dinp_acc, es)) << "dinp (accumulate)";
    EXPECT_TRUE(same_bits(shifted.dparams_acc, aligned.dparams_acc, es)) << "params (accumulate)";
    const LnRun cpu = layernorm_on(*cpu_reference(), dt(), inp, w, bias, dout, old, N, C, 0);
    EXPECT_TRUE(all_within(aligned.out_v, cpu.out_v, layernorm_vs_cpu())) << "out vs CPU";
    EXPECT_TRUE(all_within(aligned.dinp_v, cpu.dinp_v, layernorm_vs_cpu())) << "dinp vs CPU";
    // The columns' magnitude sums, sum |norm * dout| and sum |dout|, with the CPU's statistics.
    std::vector<double> dw_mag(size_t(C), 0.0), db_mag(size_t(C), 0.0);
    std::vector<float> row_mean(static_cast<size_t>(N)), row_rstd(static_cast<size_t>(N));
    std::memcpy(row_mean.data(), cpu.mean.data(), row_mean.size() * sizeof(float));
    std::memcpy(row_rstd.data(), cpu.rstd.data(), row_rstd.size() * sizeof(float));
    for (int r = 0; r < N; ++r) {
      for (int c = 0; c < C; ++c) {
        const size_t i = size_t(r) * C + size_t(c);
        const double norm = (double(inp[i]) - row_mean[size_t(r)]) * row_rstd[size_t(r)];
        dw_mag[size_t(c)] += std::fabs(norm * dout[i]);
        db_mag[size_t(c)] += std::fabs(double(dout[i]));
      }
    }
    EXPECT_TRUE(all_within(aligned.dweight_v, cpu.dweight_v, layernorm_param_vs_cpu(dw_mag)))
        << "dweight vs CPU";
    EXPECT_TRUE(all_within(aligned.dbias_v, cpu.dbias_v, layernorm_param_vs_cpu(db_mag)))
        << "dbias vs CPU";
  }
}

TEST_P(CudaModelOps, ResidualLayernormIsTheCompositionAtAnyAlignment) {
  // Rows whose lane chunks the fused kernel holds in registers (C <= 1024: one
  // chunk a lane, three, a 37-column row of element loads) and one it reads
  // back from memory (1032).
  for (const LnShape sh : {LnShape{9, 64}, LnShape{5, 768}, LnShape{4, 37}, LnShape{3, 1032}}) {
    const int N = sh.N, C = sh.C;
    SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C));
    const size_t n = size_t(N) * C;
    const auto a = inputs(n, 6), bv = inputs(n, 7), w = inputs(C, 8), bias = inputs(C, 9);
    // The composition, aligned.
    View ta = view_of(be(), dt(), a, 0), tb = view_of(be(), dt(), bv, 0),
         tw = view_of(be(), dt(), w, 0), tbias = view_of(be(), dt(), bias, 0);
    View res = poisoned_view(be(), dt(), n, 0), ln = poisoned_view(be(), dt(), n, 0);
    auto mean = poisoned<float>(be(), N), rstd = poisoned<float>(be(), N);
    be().residual_forward(dt(), res.ptr(), ta.ptr(), tb.ptr(), n);
    be().layernorm_forward(dt(), ln.ptr(), mean.as<float>(), rstd.as<float>(), res.ptr(), tw.ptr(),
                           tbias.ptr(), N, C);
    for (size_t offset : {size_t(0), size_t(1)}) {
      SCOPED_TRACE("offset " + std::to_string(offset));
      View fa = view_of(be(), dt(), a, offset), fb = view_of(be(), dt(), bv, offset);
      View fres = poisoned_view(be(), dt(), n, offset), fln = poisoned_view(be(), dt(), n, offset);
      auto fmean = poisoned<float>(be(), N), frstd = poisoned<float>(be(), N);
      be().residual_layernorm_forward(dt(), fres.ptr(), fln.ptr(), fmean.as<float>(),
                                      frstd.as<float>(), fa.ptr(), fb.ptr(), tw.ptr(), tbias.ptr(),
                                      N, C);
      EXPECT_TRUE(same_bits(fres.bits(), res.bits(), dtype_size(dt()))) << "residual";
      EXPECT_TRUE(same_bits(fln.bits(), ln.bits(), dtype_size(dt()))) << "ln";
      EXPECT_TRUE(same_bits(fmean.host_bytes(), mean.host_bytes(), 4)) << "mean";
      EXPECT_TRUE(same_bits(frstd.host_bytes(), rstd.host_bytes(), 4)) << "rstd";
    }
  }
}

TEST_P(CudaModelOps, EncoderRowsOfWholeChunks) {
  const int B = 3, T = 7, C = 64, V = 40;
  std::vector<int32_t> tokens(size_t(B) * T);
  for (size_t p = 0; p < tokens.size(); ++p) {
    tokens[p] = p % 2 == 0 ? 3 : int32_t((p * 7 + 1) % V);  // token 3: half the positions
  }
  tokens[4] = V - 1;
  const size_t n = tokens.size() * C;
  const auto wte = inputs(size_t(V) * C, 10), wpe = inputs(size_t(T) * C, 11), dout = inputs(n, 12),
             old_te = inputs(size_t(V) * C, 13), old_pe = inputs(size_t(T) * C, 14);
  struct Out {
    std::vector<uint8_t> out, dwte, dwpe;
  };
  auto run = [&](Backend& b, size_t offset) {
    auto tok = upload(b, tokens);
    View e = view_of(b, dt(), wte, offset), w = view_of(b, dt(), wpe, offset);
    View out = poisoned_view(b, dt(), n, offset);
    b.encoder_forward(dt(), out.ptr(), tok.as<int32_t>(), e.ptr(), w.ptr(), B, T, C);
    View g = view_of(b, dt(), dout, offset);
    View dte = view_of(b, dt(), old_te, offset), dpe = view_of(b, dt(), old_pe, offset);
    b.encoder_backward(dt(), dt(), dte.ptr(), dpe.ptr(), g.ptr(), tokens.data(), B, T, C);
    return Out{out.bits(), dte.bits(), dpe.bits()};
  };
  const Out aligned = run(be(), 0), shifted = run(be(), 1), cpu = run(*cpu_reference(), 0);
  const size_t es = dtype_size(dt());
  EXPECT_TRUE(same_bits(aligned.out, cpu.out, es)) << "forward vs CPU";
  EXPECT_TRUE(same_bits(aligned.dwte, cpu.dwte, es)) << "dwte vs CPU";
  EXPECT_TRUE(same_bits(aligned.dwpe, cpu.dwpe, es)) << "dwpe vs CPU";
  EXPECT_TRUE(same_bits(shifted.out, cpu.out, es)) << "forward vs CPU, misaligned";
  EXPECT_TRUE(same_bits(shifted.dwte, cpu.dwte, es)) << "dwte vs CPU, misaligned";
  EXPECT_TRUE(same_bits(shifted.dwpe, cpu.dwpe, es)) << "dwpe vs CPU, misaligned";
}

// The fused classifier against forward then backward, misaligned rows (the
// element path) against aligned ones (the 128-bit path, staged in shared
// memory when crossentropy_stages_rows), and against the CPU.
void CudaModelOps::check_classifier(int V, int Vp) {
  const int N = 3;
  const std::vector<int32_t> targets = {0, V - 1, V / 4};
  std::vector<float> logits = inputs(size_t(N) * Vp, 15, -4.0f, 4.0f);
  for (int r = 0; r < N; ++r) {
    for (int v = V; v < Vp; ++v) logits[size_t(r) * Vp + v] = NAN;  // padding is never used
  }
  const float dloss = 1.0f / N;
  auto tg = upload(be(), targets);
  View fused = view_of(be(), dt(), logits, 0);
  auto losses = poisoned<float>(be(), N);
  be().classifier(dt(), fused.ptr(), losses.as<float>(), tg.as<int32_t>(), dloss, N, V, Vp);
  View plain = view_of(be(), dt(), logits, 0);
  auto losses2 = poisoned<float>(be(), N);
  be().crossentropy_forward(dt(), losses2.as<float>(), plain.ptr(), tg.as<int32_t>(), N, V, Vp);
  be().crossentropy_backward(dt(), plain.ptr(), plain.ptr(), tg.as<int32_t>(), dloss, N, V, Vp);
  EXPECT_TRUE(same_bits(losses.host_bytes(), losses2.host_bytes(), 4)) << "losses";
  EXPECT_TRUE(same_bits(fused.bits(), plain.bits(), dtype_size(dt()))) << "dlogits";
  // Misaligned logits: the same bits again.
  View shifted = view_of(be(), dt(), logits, 1);
  auto losses3 = poisoned<float>(be(), N);
  be().classifier(dt(), shifted.ptr(), losses3.as<float>(), tg.as<int32_t>(), dloss, N, V, Vp);
  EXPECT_TRUE(same_bits(losses3.host_bytes(), losses.host_bytes(), 4)) << "losses, misaligned";
  EXPECT_TRUE(same_bits(shifted.bits(), fused.bits(), dtype_size(dt()))) << "dlogits, misaligned";
  // Against the CPU (tolerances.h).
  Backend& cpu = *cpu_reference();
  auto ctg = upload(cpu, targets);
  View cl = view_of(cpu, dt(), logits, 0);
  auto closs = poisoned<float>(cpu, N);
  cpu.classifier(dt(), cl.ptr(), closs.as<float>(), ctg.as<int32_t>(), dloss, N, V, Vp);
  EXPECT_TRUE(all_within(download<float>(losses), download<float>(closs),
                         abs_rel(kCrossEntropyLossAbs, 0.0)))
      << "losses vs CPU";
  const Tolerance t = dt() == DType::kBF16 ? bf16_ulps(kCrossEntropyBf16Ulps)
                                           : abs_rel(kCrossEntropyGradRel * dloss, 0.0);
  EXPECT_TRUE(all_within(fused.values(), cl.values(), t)) << "dlogits vs CPU";
}

TEST_P(CudaModelOps, ClassifierOverGpt2Vocabulary) {
  // Staged on sm_90 and in the emulation (201 KiB of 227), not on sm_80's 163 KiB.
  if (cuda::emulated()) {
    EXPECT_TRUE(cuda::crossentropy_stages_rows(50304));
  }
  check_classifier(50257, 50304);
}

TEST_P(CudaModelOps, ClassifierRowsTooWideToStage) {
  // The smallest whole-chunk row past the device's shared memory: 128-bit
  // loads, the row read again for each pass.
  int Vp = 50304;
  while (cuda::crossentropy_stages_rows(Vp)) Vp += 8 * 1024;
  EXPECT_FALSE(cuda::crossentropy_stages_rows(Vp));
  check_classifier(Vp - 5, Vp);
}

TEST_P(CudaModelOps, TargetsOutsideTheVocabularyAreIgnoredWithoutReadingPastTheRow) {
  // The CPU throws for them; the device cannot without a host read, so such a
  // row gets loss 0 and a zero gradient, as an ignored row does.
  const int N = 3, V = 50, Vp = 64;
  const std::vector<int32_t> targets = {V, 7, 1 << 30};
  auto tg = upload(be(), targets);
  View l = view_of(be(), dt(), inputs(size_t(N) * Vp, 16), 0);
  auto losses = poisoned<float>(be(), N);
  be().classifier(dt(), l.ptr(), losses.as<float>(), tg.as<int32_t>(), 1.0f, N, V, Vp);
  const auto loss = download<float>(losses);
  const auto d = l.values();
  EXPECT_EQ(loss[0], 0.0f);
  EXPECT_EQ(loss[2], 0.0f);
  EXPECT_GT(loss[1], 0.0f);
  for (int v = 0; v < Vp; ++v) {
    EXPECT_EQ(d[v], 0.0f) << v;
    EXPECT_EQ(d[size_t(2) * Vp + v], 0.0f) << v;
  }
}

TEST_P(CudaModelOps, SumSquaresDoesNotDependOnAlignment) {
  const size_t n = 2 * 32768 + 1001;
  const auto x = inputs(n, 17, -2.0f, 2.0f);
  auto run = [&](size_t offset) {
    View t = view_of(be(), dt(), x, offset);
    auto out = poisoned<double>(be(), 1);
    be().sum_squares(dt(), t.ptr(), n, out.as<double>());
    return out.host_bytes();
  };
  const auto aligned = run(0);
  EXPECT_TRUE(same_bits(run(1), aligned, 8));
  double want = 0.0, got = 0.0;
  for (float v : x) want += double(v) * v;
  std::memcpy(&got, aligned.data(), 8);
  EXPECT_NEAR(got, want, kReductionRel * want);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaModelOps, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

TEST(CudaEncoderPlan, GroupsPositionsByTokenInPositionOrder) {
  // Host only: the plan the kernel reads.
  cuda::EncoderBackwardPlan plan;
  const std::vector<int32_t> tokens = {5, 3, 5, 0, 3, 5};
  plan.build(tokens.data(), 6);
  ASSERT_EQ(plan.groups(), 3);
  ASSERT_EQ(plan.packed_bytes(), (3 * 6 + 1) * sizeof(int32_t));
  const std::vector<int32_t> packed(plan.packed(), plan.packed() + 19);
  const std::vector<int32_t> want = {3, 1, 4, 0, 2, 5,  // positions by token, then position
                                     0, 1, 3, 6,        // group starts
                                     0, 0, 0,           // unused
                                     0, 3, 5,           // group tokens
                                     0, 0, 0};
  EXPECT_EQ(packed, want);
  // Another batch of the same size: the same buffer, the same size.
  const int32_t* before = plan.packed();
  const std::vector<int32_t> other = {1, 1, 1, 1, 1, 1};
  plan.build(other.data(), 6);
  EXPECT_EQ(plan.groups(), 1);
  EXPECT_EQ(plan.packed(), before);
  EXPECT_EQ(plan.packed_bytes(), (3 * 6 + 1) * sizeof(int32_t));
}

}  // namespace
}  // namespace srkit::conformance
