// The CUDA attention's internals (kernels/cuda/attention.h), which the backend
// conformance suite sees only through out and dinp: the probabilities its
// forward leaves in the scratch (kernels/cuda/attention_layout.h) are a causal
// softmax with masked entries exactly 0, and the state holds each row's max and
// sum; backward recomputes the same probabilities bit for bit (read back
// exactly through dv = P^T dy with a one-hot dy); the score gradients it leaves
// are exactly 0 where masked; two runs give the same bits; and on a sequence
// longer than two warps (several keys per lane, 128-bit permutes) out and dinp
// agree with the CPU kernels within the conformance suite's bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/cpu/attention.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/device.h"

namespace srkit {
namespace {

constexpr int B = 2, T = 5, C = 12, NH = 2, HS = C / NH;  // HS >= T: see OneHot below

std::vector<float> values(size_t n, uint64_t seed, float lo, float hi) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 3;
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const float u = float(s >> 40) / float(1ull << 24);
    v[i] = bf16_to_float(float_to_bf16_rn(lo + (hi - lo) * u));  // exact in both dtypes
  }
  return v;
}

std::vector<uint8_t> to_bytes(DType dt, const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * dtype_size(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::kF32) {
      std::memcpy(&b[4 * i], &v[i], 4);
    } else {
      const bf16 h = float_to_bf16_rn(v[i]);
      std::memcpy(&b[2 * i], &h, 2);
    }
  }
  return b;
}

float element(DType dt, const std::vector<uint8_t>& bytes, size_t i) {
  if (dt == DType::kF32) {
    float f;
    std::memcpy(&f, &bytes[4 * i], 4);
    return f;
  }
  bf16 h;
  std::memcpy(&h, &bytes[2 * i], 2);
  return bf16_to_float(h);
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

struct DeviceBytes {
  explicit DeviceBytes(size_t n) : size(n), ptr(cuda::device_malloc(n)) { poison(); }
  DeviceBytes(const std::vector<uint8_t>& host) : DeviceBytes(host.size()) {
    cuda::copy_to_device(ptr, host.data(), size);
  }
  ~DeviceBytes() { cuda::device_free(ptr); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void poison() {  // NaN in both dtypes
    cuda::copy_to_device(ptr, std::vector<uint8_t>(size, 0xff).data(), size);
  }
  std::vector<uint8_t> host(size_t offset, size_t bytes) const {
    cuda::synchronize();
    std::vector<uint8_t> h(bytes);
    cuda::copy_to_host(h.data(), static_cast<const char*>(ptr) + offset, bytes);
    return h;
  }
  std::vector<uint8_t> host() const { return host(0, size); }
  size_t size;
  void* ptr;
};

class AttentionGpu : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::device_available(&reason)) GTEST_SKIP() << reason;
    stream_ = cuda::stream_create();
    gemm_ = std::make_unique<cuda::Gemm>(stream_);
  }
  void TearDown() override {
    gemm_.reset();
    if (stream_) cuda::stream_destroy(stream_);
  }
  DType dt() const { return GetParam(); }
  cuda::Stream stream_ = nullptr;
  std::unique_ptr<cuda::Gemm> gemm_;
};

TEST_P(AttentionGpu, ProbabilitiesAreACausalSoftmaxThatBackwardRecomputesExactly) {
  const cuda::AttentionLayout l = cuda::attention_layout(dt(), B, T, C, NH);
  const size_t rows = size_t(B) * NH * T;
  const auto inp = values(size_t(B) * T * 3 * C, 1, -2.0f, 2.0f);
  DeviceBytes x(to_bytes(dt(), inp)), out(size_t(B) * T * C * dtype_size(dt()));
  DeviceBytes state(l.state_per_layer), scratch(l.scratch());
  cuda::attention_forward(*gemm_, dt(), out.ptr, state.ptr, scratch.ptr, x.ptr, B, T, C, NH,
                          stream_);
  const auto probs = scratch.host(l.probs_offset(), l.probs);
  const auto st = state.host();
  const float scale = 1.0f / std::sqrt(float(HS));
  for (size_t r = 0; r < rows; ++r) {
    const int t = int(r % T), h = int(r / T % NH), b = int(r / T / NH);
    float mx, sum;
    std::memcpy(&mx, &st[8 * r], 4);
    std::memcpy(&sum, &st[8 * r + 4], 4);
    // fp64 softmax of the visible scores.
    std::vector<double> s(size_t(t) + 1);
    double smax = -1e300, ssum = 0.0;
    for (int t2 = 0; t2 <= t; ++t2) {
      double dot = 0.0;
      for (int i = 0; i < HS; ++i) {
        dot += double(inp[(size_t(b) * T + t) * 3 * C + size_t(h) * HS + i]) *
               double(inp[(size_t(b) * T + t2) * 3 * C + C + size_t(h) * HS + i]);
      }
      s[size_t(t2)] = dot * scale;
      smax = std::max(smax, s[size_t(t2)]);
    }
    for (double v : s) ssum += std::exp(v - smax);
    EXPECT_NEAR(mx, smax, 1e-5 * (1.0 + std::fabs(smax))) << "row " << r << " max";
    EXPECT_NEAR(sum, ssum, 1e-5 * ssum) << "row " << r << " sum";
    for (int t2 = 0; t2 < T; ++t2) {
      const float p = element(dt(), probs, r * T + size_t(t2));
      if (t2 > t) {
        EXPECT_EQ(bits(p), 0u) << "row " << r << " masked key " << t2;
      } else {
        const double want = std::exp(s[size_t(t2)] - smax) / ssum;
        EXPECT_NEAR(p, want, (dt() == DType::kF32 ? 1e-6 : 4e-3) * want + 1e-7)
            << "row " << r << " key " << t2;
      }
    }
  }

  // Backward on a poisoned scratch with dy[b,h,t,i] = (i == t): then
  // dv[b,h,t2,i] = sum_t P[t,t2] dy[t,i] = P[i,t2] exactly (one product by 1,
  // the rest exact zeros), so the fp32 dv holds the recomputed P^T.
  static_assert(HS >= T, "the one-hot dy needs a column per query");
  std::vector<float> dy(size_t(B) * T * C, 0.0f);
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < NH; ++h) dy[(size_t(b) * T + t) * C + size_t(h) * HS + size_t(t)] = 1.0f;
    }
  }
  DeviceBytes g(to_bytes(dt(), dy)), dinp(size_t(B) * T * 3 * C * dtype_size(dt()));
  scratch.poison();
  cuda::attention_backward(*gemm_, dt(), dinp.ptr, GradWrite::kOverwrite, g.ptr, x.ptr, out.ptr,
                           state.ptr, scratch.ptr, B, T, C, NH, stream_);
  const auto dv = scratch.host(l.grad_offset(2), l.head_grad);
  size_t bad = 0;
  for (size_t r = 0; r < rows; ++r) {  // r = (b, h, t): P row t
    const size_t bh = r / T, t = r % T;
    for (int t2 = 0; t2 < T; ++t2) {
      const float p = element(dt(), probs, r * T + size_t(t2));
      float got;
      std::memcpy(&got, &dv[4 * ((bh * T + size_t(t2)) * HS + t)], 4);
      if (bits(got) != bits(p) && ++bad <= 5) {
        ADD_FAILURE() << "recomputed P[" << r << ", " << t2 << "] = " << got << ", forward's " << p;
      }
    }
  }
  EXPECT_EQ(bad, 0u);
  // The score gradients left in the probabilities' place: 0 where masked.
  const auto ds = scratch.host(l.probs_offset(), l.probs);
  for (size_t r = 0; r < rows; ++r) {
    for (int t2 = int(r % T) + 1; t2 < T; ++t2) {
      EXPECT_EQ(bits(element(dt(), ds, r * T + size_t(t2))), 0u)
          << "dS row " << r << " masked key " << t2;
    }
  }
}

TEST_P(AttentionGpu, TwoRunsGiveTheSameBits) {
  const cuda::AttentionLayout l = cuda::attention_layout(dt(), B, T, C, NH);
  const auto inp = values(size_t(B) * T * 3 * C, 2, -2.0f, 2.0f);
  const auto dy = values(size_t(B) * T * C, 3, -1.0f, 1.0f);
  const auto old = values(size_t(B) * T * 3 * C, 4, -1.0f, 1.0f);
  std::vector<std::vector<uint8_t>> results[2];
  for (int run = 0; run < 2; ++run) {
    DeviceBytes x(to_bytes(dt(), inp)), g(to_bytes(dt(), dy));
    DeviceBytes out(size_t(B) * T * C * dtype_size(dt())), state(l.state_per_layer),
        scratch(l.scratch()), dinp(to_bytes(dt(), old));
    cuda::attention_forward(*gemm_, dt(), out.ptr, state.ptr, scratch.ptr, x.ptr, B, T, C, NH,
                            stream_);
    scratch.poison();
    cuda::attention_backward(*gemm_, dt(), dinp.ptr, GradWrite::kAccumulate, g.ptr, x.ptr, out.ptr,
                             state.ptr, scratch.ptr, B, T, C, NH, stream_);
    results[run] = {out.host(), state.host(), dinp.host()};
  }
  const char* names[] = {"out", "state", "dinp"};
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(results[0][k], results[1][k]) << names[k];
}

template <typename T>
void cpu_attention(const std::vector<float>& inp, const std::vector<float>& dy,
                   const std::vector<float>& old, int b, int t, int c, int nh,
                   std::vector<float>* out, std::vector<float>* dinp) {
  auto stored = [](const std::vector<float>& v) {
    std::vector<T> s(v.size());
    for (size_t i = 0; i < v.size(); ++i) s[i] = cpu::from_f32<T>(v[i]);
    return s;
  };
  const std::vector<T> x = stored(inp), g = stored(dy);
  std::vector<T> o(size_t(b) * t * c), att(size_t(b) * nh * t * t), dx = stored(old);
  cpu::attention_forward(o.data(), att.data(), x.data(), b, t, c, nh);
  cpu::attention_backward(dx.data(), GradWrite::kAccumulate, g.data(), x.data(), att.data(), b, t,
                          c, nh);
  out->assign(o.size(), 0.0f);
  dinp->assign(dx.size(), 0.0f);
  for (size_t i = 0; i < o.size(); ++i) (*out)[i] = cpu::to_f32(o[i]);
  for (size_t i = 0; i < dx.size(); ++i) (*dinp)[i] = cpu::to_f32(dx[i]);
}

TEST_P(AttentionGpu, MatchesTheCpuOnALongerSequence) {
  const int b = 1, t = 70, c = 32, nh = 2;  // 70 keys: up to 3 per lane; head rows of 32+ bytes
  const cuda::AttentionLayout l = cuda::attention_layout(dt(), b, t, c, nh);
  const auto inp = values(size_t(b) * t * 3 * c, 5, -2.0f, 2.0f);
  const auto dy = values(size_t(b) * t * c, 6, -1.0f, 1.0f);
  const auto old = values(size_t(b) * t * 3 * c, 7, -1.0f, 1.0f);
  DeviceBytes x(to_bytes(dt(), inp)), g(to_bytes(dt(), dy)), dinp(to_bytes(dt(), old));
  DeviceBytes out(size_t(b) * t * c * dtype_size(dt())), state(l.state_per_layer),
      scratch(l.scratch());
  cuda::attention_forward(*gemm_, dt(), out.ptr, state.ptr, scratch.ptr, x.ptr, b, t, c, nh,
                          stream_);
  scratch.poison();
  cuda::attention_backward(*gemm_, dt(), dinp.ptr, GradWrite::kAccumulate, g.ptr, x.ptr, out.ptr,
                           state.ptr, scratch.ptr, b, t, c, nh, stream_);
  std::vector<float> want_out, want_dinp;
  if (dt() == DType::kF32) {
    cpu_attention<float>(inp, dy, old, b, t, c, nh, &want_out, &want_dinp);
  } else {
    cpu_attention<bf16>(inp, dy, old, b, t, c, nh, &want_out, &want_dinp);
  }
  const auto got_out = out.host(), got_dinp = dinp.host();
  // tolerances.h: fp32 1e-5 of the largest magnitude; bf16 one ulp plus 2^-6 of it.
  auto check = [&](const std::vector<uint8_t>& got, const std::vector<float>& want,
                   const char* what) {
    double mx = 0.0;
    for (float w : want) mx = std::max(mx, std::fabs(double(w)));
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const double w = want[i], v = element(dt(), got, i);
      const double tol = dt() == DType::kF32 ? 1e-5 * mx : std::ldexp(std::fabs(w), -7) + mx / 64;
      if (!(std::fabs(v - w) <= tol) && ++bad <= 5) {
        ADD_FAILURE() << what << " element " << i << ": got " << v << ", CPU " << w;
      }
    }
    EXPECT_EQ(bad, 0u) << what;
  };
  check(got_out, want_out, "out");
  check(got_dinp, want_dinp, "dinp");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AttentionGpu, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

}  // namespace
}  // namespace srkit
