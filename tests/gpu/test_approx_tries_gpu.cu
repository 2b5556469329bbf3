// The approximate first tries (kernels/cuda/gelu_fast.cuh, softmax_fast.cuh), on
// a GPU and in the CPU emulation. GELU:
//   - the kernels' bits equal the CPU's exact expression on every bf16 input
//     (forward) and on every bf16 input times a grid of gradients and stored
//     values (backward), through the vectorized and the element-wise paths;
//   - the try is kept for nearly every input (else it buys nothing);
//   - a margin below the budgeted error is caught: in the emulation the
//     approximate instructions err by their full budget (approx_math.cuh), so a
//     zero margin must keep some wrong tries there.
// The flash attention's P and dS: the same three, over a sweep of the scores'
// range (the kernels themselves are held to the CPU by the conformance suite).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/grad_write.h"
#include "kernels/common/math.h"
#include "kernels/common/softmax.h"
#include "kernels/cuda/compat.cuh"
#include "kernels/cuda/device.h"
#include "kernels/cuda/gelu_fast.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/pointwise.h"
#include "kernels/cuda/softmax_fast.cuh"
#include "tests/gpu/device_vector.h"

namespace srkit {
namespace {

class ApproxTriesGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::device_available(&reason)) GTEST_SKIP() << reason;
  }
};

std::vector<uint16_t> every_bf16() {
  std::vector<uint16_t> v(65536);
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint16_t(i);
  return v;
}
float f(uint16_t bits) { return bf16_to_float(bf16{bits}); }
uint16_t rn(float x) { return float_to_bf16_rn(x).bits; }

// bf16 of N(0, sd) samples (Box-Muller from a fixed LCG): the inputs GELU meets.
std::vector<uint16_t> normal_bf16(size_t n, float sd, uint64_t seed) {
  std::vector<uint16_t> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 3;
  auto unit = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return (double(s >> 11) + 0.5) * 0x1p-53;
  };
  for (auto& b : v) {
    const double r = std::sqrt(-2.0 * std::log(unit())) * std::cos(6.283185307179586 * unit());
    b = rn(float(r * sd));
  }
  return v;
}

// The CPU's expressions (kernels/cpu/pointwise.cpp computes the same bits).
uint16_t gelu_bits(uint16_t x) { return rn(gelu(f(x))); }
uint16_t gelu_backward_bits(uint16_t x, uint16_t dout, float base) {
  return rn(base + gelu_grad(f(x)) * f(dout));
}

// Runs the public kernels at element offset `offset` (1 makes every pointer
// misaligned, so the element-wise path runs instead of the 16-byte one).
std::vector<uint16_t> gpu_forward(const std::vector<uint16_t>& x, size_t offset) {
  std::vector<uint16_t> in(offset, 0);
  in.insert(in.end(), x.begin(), x.end());
  test::DeviceVector<uint16_t> din(in), dout(std::vector<uint16_t>(in.size(), 0x7fc1));
  cuda::gelu_forward(DType::kBF16, dout.p + offset, din.p + offset, x.size(), nullptr);
  auto h = dout.host();
  return std::vector<uint16_t>(h.begin() + offset, h.end());
}

TEST_F(ApproxTriesGpu, ForwardEqualsTheCpuOnEveryBf16Input) {
  const auto x = every_bf16();
  for (size_t offset : {size_t(0), size_t(1)}) {
    const auto got = gpu_forward(x, offset);
    size_t wrong = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t want = gelu_bits(x[i]);
      if (got[i] != want && wrong++ < 5) {
        ADD_FAILURE() << "gelu(" << f(x[i]) << " = 0x" << std::hex << x[i] << ") gave 0x" << got[i]
                      << ", the CPU 0x" << want << std::dec << " (offset " << offset << ")";
      }
    }
    EXPECT_EQ(wrong, 0u) << "of 65536 inputs, offset " << offset;
  }
}

TEST_F(ApproxTriesGpu, BackwardEqualsTheCpuOverEveryBf16InputAndAGridOfGradients) {
  // Gradients of every scale (a subnormal, 0, huge, NaN and Inf included), and
  // stored values that are 0, of the gradient's scale with either sign, or huge.
  const float douts[] = {1.0f, -0.3125f, 3.0e-3f, -7.5f, 1.0e30f, -2.0e-39f, 0.0f, 1.0e-20f};
  const auto all = every_bf16();
  std::vector<uint16_t> x, g, old;
  for (float d : douts) {
    for (size_t i = 0; i < all.size(); ++i) {
      x.push_back(all[i]);
      g.push_back(rn(d));
      const uint32_t h = uint32_t(i) * 2654435761u;
      const float scale = (h >> 30) == 0 ? 0.0f : (h >> 30) == 3 ? 3.0e38f : d;
      old.push_back(rn(scale * (float(int32_t(h >> 8) % 1000) / 700.0f)));
    }
  }
  x.push_back(0x3f80);  // NaN and Inf gradients at x = 1
  g.push_back(0x7fc0);
  old.push_back(0);
  x.push_back(0x3f80);
  g.push_back(0xff80);
  old.push_back(0);
  for (size_t offset : {size_t(0), size_t(1)}) {
    for (GradWrite mode : {GradWrite::kOverwrite, GradWrite::kAccumulate}) {
      auto pad = [&](const std::vector<uint16_t>& v) {
        std::vector<uint16_t> p(offset, 0);
        p.insert(p.end(), v.begin(), v.end());
        return p;
      };
      test::DeviceVector<uint16_t> dx(pad(x)), dg(pad(g)), dinp(pad(old));
      cuda::gelu_backward(DType::kBF16, dinp.p + offset, mode, dx.p + offset, dg.p + offset,
                          x.size(), nullptr);
      const auto got = dinp.host();
      size_t wrong = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const float base = mode == GradWrite::kAccumulate ? f(old[i]) : 0.0f;
        const uint16_t want = gelu_backward_bits(x[i], g[i], base);
        if (got[offset + i] != want && wrong++ < 5) {
          ADD_FAILURE() << "x " << f(x[i]) << " dout " << f(g[i]) << " base " << base << " gave 0x"
                        << std::hex << got[offset + i] << ", the CPU 0x" << want << std::dec
                        << (mode == GradWrite::kAccumulate ? " (accumulate" : " (overwrite")
                        << ", offset " << offset << ")";
        }
      }
      EXPECT_EQ(wrong, 0u) << "of " << x.size() << " elements";
    }
  }
}

// Per element: whether the try was kept, and whether a kept try rounds to a
// bf16 other than the exact expression's (computed here on the device). The
// tries take any float, so the probes reach far more inputs than bf16 holds.
__global__ void probe_gelu(const float* x, const float* dout, size_t n, cuda::ApproxMargin m,
                           uint8_t* kept, uint8_t* wrong) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  float y = 0.0f;
  bool ok, bad;
  if (dout) {
    ok = cuda::gelu_backward_fast(v, dout[i], 0.0f, m, y);
    bad = float_to_bf16_rn(y).bits != float_to_bf16_rn(0.0f + gelu_grad(v) * dout[i]).bits;
  } else {
    ok = cuda::gelu_fast(v, m, y);
    bad = float_to_bf16_rn(y).bits != float_to_bf16_rn(gelu(v)).bits;
  }
  kept[i] = ok;
  wrong[i] = ok && bad;
}

struct ProbeCounts {
  size_t kept = 0, wrong = 0;
};
template <typename Kernel>
ProbeCounts probe(Kernel kernel, const char* name, const std::vector<float>& x,
                  const std::vector<float>* second, cuda::ApproxMargin m) {
  const size_t n = x.size();
  test::DeviceVector<float> dx(x), d2(second ? *second : x);
  test::DeviceVector<uint8_t> kept{std::vector<uint8_t>(n)}, wrong{std::vector<uint8_t>(n)};
  cuda::launch(kernel, unsigned((n + 255) / 256), 256, 0, nullptr, name, dx.p,
               second ? static_cast<const float*>(d2.p) : nullptr, n, m, kept.p, wrong.p);
  ProbeCounts c;
  for (uint8_t k : kept.host()) c.kept += k;
  for (uint8_t w : wrong.host()) c.wrong += w;
  return c;
}
ProbeCounts probe_gelu_tries(const std::vector<float>& x, const std::vector<float>* dout,
                             cuda::ApproxMargin m) {
  return probe(probe_gelu, "probe_gelu", x, dout, m);
}

std::vector<float> as_floats(const std::vector<uint16_t>& b) {
  std::vector<float> v(b.size());
  for (size_t i = 0; i < b.size(); ++i) v[i] = f(b[i]);
  return v;
}

// Factors of either sign and many scales (2^-30 .. 2^9): gradients, dP - D.
std::vector<float> factors(size_t n) {
  std::vector<float> w(n);
  uint64_t s = 77;
  for (float& x : w) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const int exponent = int((s >> 40) % 40) - 30;
    x = std::ldexp(float((s >> 11) & 0xffff) / 65536.0f + 0.5f, exponent) * ((s >> 63) ? -1 : 1);
  }
  return w;
}

// Every 1024th float of either sign up to 9.5 (past the try's range).
std::vector<float> activation_sweep() {
  std::vector<float> x;
  for (uint32_t b = 0; b <= 0x41180000u; b += 1024) {
    x.push_back(bits_as_float(b));
    x.push_back(-bits_as_float(b));
  }
  return x;
}

using ProbeFn = ProbeCounts (*)(const std::vector<float>&, const std::vector<float>*,
                                cuda::ApproxMargin);
struct SweepCounts {
  ProbeCounts alone, with;  // the try alone, and with a second operand
};
// Probes the tries over x alone (GELU forward, P) and with a factor of many
// scales beside each element (GELU backward's gradient, dS's factor).
SweepCounts sweep(const char* what, ProbeFn run, const std::vector<float>& x,
                  cuda::ApproxMargin m) {
  const auto w = factors(x.size());
  const SweepCounts c{run(x, nullptr, m), run(x, &w, m)};
  const double n = double(x.size());
  std::printf(
      "[ %s try ] margin %g + %g |a|: kept %.3f%% alone, %.3f%% with a factor; "
      "wrong %zu and %zu; of %zu\n",
      what, double(m.rel), double(m.rel_per_exponent), 100.0 * double(c.alone.kept) / n,
      100.0 * double(c.with.kept) / n, c.alone.wrong, c.with.wrong, x.size());
  return c;
}

// With no margin at all, and the emulation's instructions erring by their whole
// budget, some kept tries must be wrong.
void expect_wrong_tries_without_a_margin(const char* what, ProbeFn run,
                                         const std::vector<float>& x) {
  const SweepCounts c = sweep(what, run, x, cuda::ApproxMargin{0.0f, 0.0f});
#if defined(SRKIT_CUDA_EMU)
  EXPECT_GT(c.alone.wrong, 0u) << what << ": the emulated error did not show without a margin";
  EXPECT_GT(c.with.wrong, 0u) << what << ": the emulated error did not show without a margin";
#else
  (void)c;
#endif
}

// Activations of the size GELU meets: bf16 pre-activations with sd 1.
constexpr size_t kSamples = 1 << 18;

TEST_F(ApproxTriesGpu, TheGeluTryIsKeptForNearlyEveryActivation) {
  const auto x = as_floats(normal_bf16(kSamples, 1.0f, 1));
  const auto g = as_floats(normal_bf16(kSamples, 1e-3f, 2));
  const ProbeCounts fwd = probe_gelu_tries(x, nullptr, cuda::kGeluFastMargin);
  const ProbeCounts bwd = probe_gelu_tries(x, &g, cuda::kGeluFastMargin);
  std::printf("[ GELU try ] kept: forward %.3f%%, backward %.3f%% of %zu N(0,1) inputs\n",
              100.0 * double(fwd.kept) / kSamples, 100.0 * double(bwd.kept) / kSamples, kSamples);
  EXPECT_EQ(fwd.wrong, 0u);
  EXPECT_EQ(bwd.wrong, 0u);
  // In the emulation the instructions err by their whole budget, so the rates
  // there are the lowest a GPU within the budget can give.
  EXPECT_GE(double(fwd.kept) / kSamples, 0.995);
  EXPECT_GE(double(bwd.kept) / kSamples, 0.985);
}

TEST_F(ApproxTriesGpu, GeluTriesRoundAsTheExactExpressionOverAFloatSweep) {
  const SweepCounts c = sweep("GELU", probe_gelu_tries, activation_sweep(), cuda::kGeluFastMargin);
  EXPECT_EQ(c.alone.wrong, 0u);
  EXPECT_EQ(c.with.wrong, 0u);
}

TEST_F(ApproxTriesGpu, AGeluMarginBelowTheBudgetIsCaught) {
  expect_wrong_tries_without_a_margin("GELU", probe_gelu_tries, activation_sweep());
}

// ---- the flash attention's P = e^(x - max) and dS = P w ----------------------

__global__ void probe_softmax(const float* d, const float* w, size_t n, cuda::ApproxMargin m,
                              uint8_t* kept, uint8_t* wrong) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float p = 0.0f, ds = 0.0f;
  const bool ok = w ? cuda::softmax_term_and_product_fast(d[i], 0.0f, w[i], m, p, ds)
                    : cuda::softmax_term_fast(d[i], 0.0f, m, p);
  const float pe = softmax_term(d[i], 0.0f);
  bool bad = float_to_bf16_rn(p).bits != float_to_bf16_rn(pe).bits;
  if (w) bad = bad || float_to_bf16_rn(ds).bits != float_to_bf16_rn(pe * w[i]).bits;
  kept[i] = ok;
  wrong[i] = ok && bad;
}

ProbeCounts probe_softmax_terms(const std::vector<float>& d, const std::vector<float>* w,
                                cuda::ApproxMargin m) {
  return probe(probe_softmax, "probe_softmax", d, w, m);
}

// Every 1024th float from -90 to 0 (past the try's range, through the
// subnormal results' edge).
std::vector<float> score_sweep() {
  std::vector<float> d;
  for (uint32_t b = 0x80000000u; b <= 0xc2b40000u; b += 1024) d.push_back(bits_as_float(b));
  return d;
}
TEST_F(ApproxTriesGpu, SoftmaxTriesRoundAsExpPolyAndAreKeptForNearlyEveryScore) {
  const auto d = score_sweep();
  const SweepCounts c = sweep("softmax", probe_softmax_terms, d, cuda::kSoftmaxFastMargin);
  EXPECT_EQ(c.alone.wrong, 0u);
  EXPECT_EQ(c.with.wrong, 0u);
  // 87 of the 90 are in the try's range.
  EXPECT_GE(double(c.alone.kept) / d.size(), 0.95);
  EXPECT_GE(double(c.with.kept) / d.size(), 0.94);
  // Scores of the size attention meets most: d in [-10, 0].
  std::vector<float> near;
  for (float x : d)
    if (x >= -10.0f) near.push_back(x);
  const ProbeCounts q = probe_softmax_terms(near, nullptr, cuda::kSoftmaxFastMargin);
  EXPECT_GE(double(q.kept) / near.size(), 0.995);
}

TEST_F(ApproxTriesGpu, ASoftmaxMarginBelowTheBudgetIsCaught) {
  expect_wrong_tries_without_a_margin("softmax", probe_softmax_terms, score_sweep());
}

}  // namespace
}  // namespace srkit
