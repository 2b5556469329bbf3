// The fused causal attention (kernels/cuda/flash_attention.h), on a GPU and in
// the CPU emulation, against an fp64 reference written here from the same
// bf16 inputs: forward's output and log-sum-exp, backward's dq, dk, dv (both
// GradWrite modes), for shapes with T not a multiple of any tile (1, 13, 130,
// 257, 1000), one and several heads and batches, head sizes 64 and 128. Beside each
// comparison the error of the unfused CPU bf16 kernels (kernels/cpu/attention.h)
// against the same reference is measured and printed, the yardstick for the
// tolerance. Also: repeated backward runs give the same bytes, and keys after a query
// do not reach its row (NaN in tiles the kernels must skip, huge values in the
// masked part of a diagonal tile).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/cpu/attention.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/flash_attention.h"

namespace srkit {
namespace {

struct Shape {
  int B, T, NH, hs;
  int C() const { return NH * hs; }
  size_t qkv() const { return size_t(B) * T * 3 * C(); }
  size_t rows() const { return size_t(B) * T * C(); }  // elements of out, dout
  size_t heads() const { return size_t(B) * NH * T; }  // lse rows
};

std::string name(const Shape& s) {
  char buf[64];  // snprintf: g++ 12 warns (-Wrestrict, falsely) on the chain of string +
  std::snprintf(buf, sizeof buf, "B%d_T%d_NH%d_hs%d", s.B, s.T, s.NH, s.hs);
  return buf;
}
void PrintTo(const Shape& s, std::ostream* os) { *os << name(s); }  // gtest's parameter names

// bf16 values uniform in [lo, hi) from a fixed seed.
std::vector<bf16> values(size_t n, uint64_t seed, float lo, float hi) {
  std::vector<bf16> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;
  for (bf16& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = float_to_bf16_rn(lo + (hi - lo) * float(s >> 40) / float(1ull << 24));
  }
  return v;
}

// q and k in [-2, 2) make scores of standard deviation about 1.5 (some rows
// peaked, so the running maximum moves between tiles); v in [-1, 1).
std::vector<bf16> make_qkv(const Shape& s, uint64_t seed) {
  std::vector<bf16> x = values(s.qkv(), seed, -2.0f, 2.0f);
  const std::vector<bf16> v = values(s.qkv(), seed + 100, -1.0f, 1.0f);
  const int C = s.C();
  for (size_t row = 0; row < size_t(s.B) * s.T; ++row)
    for (int c = 2 * C; c < 3 * C; ++c) x[row * 3 * C + c] = v[row * 3 * C + c];
  return x;
}

double f(bf16 x) { return double(bf16_to_float(x)); }

struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) : size(bytes), ptr(cuda::device_malloc(bytes)) {
    fill(0xff);  // NaN as bf16 and fp32: what a kernel fails to write shows
  }
  template <typename E>
  explicit DeviceBuffer(const std::vector<E>& h) : DeviceBuffer(h.size() * sizeof(E)) {
    cuda::copy_to_device(ptr, h.data(), size);
  }
  ~DeviceBuffer() { cuda::device_free(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void fill(uint8_t byte) {
    cuda::copy_to_device(ptr, std::vector<uint8_t>(size, byte).data(), size);
  }
  template <typename E>
  std::vector<E> host() const {
    cuda::synchronize();
    std::vector<E> h(size / sizeof(E));
    cuda::copy_to_host(h.data(), ptr, size);
    return h;
  }
  size_t size;
  void* ptr;
};

// ---- the fp64 reference ---------------------------------------------------------

struct Reference {
  std::vector<double> out, lse, dqkv;
};

// Causal softmax attention per head in fp64 from the bf16 inputs, and its
// gradients for dout (skipped when dout is empty).
Reference reference(const Shape& s, const std::vector<bf16>& x, const std::vector<bf16>& dout) {
  const int T = s.T, C = s.C(), hs = s.hs;
  const size_t C3 = 3 * size_t(C);
  const double scale = 1.0 / std::sqrt(double(hs));
  Reference r;
  r.out.assign(s.rows(), 0.0);
  r.lse.assign(s.heads(), 0.0);
  if (!dout.empty()) r.dqkv.assign(s.qkv(), 0.0);
  std::vector<double> p(size_t(T) * T), dp(size_t(T) * T);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.NH; ++h) {
      auto q = [&](int t, int i) { return f(x[(size_t(b) * T + t) * C3 + size_t(h) * hs + i]); };
      auto k = [&](int t, int i) { return f(x[(size_t(b) * T + t) * C3 + C + h * hs + i]); };
      auto v = [&](int t, int i) { return f(x[(size_t(b) * T + t) * C3 + 2 * C + h * hs + i]); };
      for (int t = 0; t < T; ++t) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int t2 = 0; t2 <= t; ++t2) {
          double d = 0.0;
          for (int i = 0; i < hs; ++i) d += q(t, i) * k(t2, i);
          p[size_t(t) * T + t2] = d * scale;
          mx = std::max(mx, d * scale);
        }
        double sum = 0.0;
        for (int t2 = 0; t2 <= t; ++t2) sum += std::exp(p[size_t(t) * T + t2] - mx);
        r.lse[(size_t(b) * s.NH + h) * T + t] = mx + std::log(sum);
        for (int t2 = 0; t2 <= t; ++t2)
          p[size_t(t) * T + t2] = std::exp(p[size_t(t) * T + t2] - mx) / sum;
        for (int i = 0; i < hs; ++i) {
          double o = 0.0;
          for (int t2 = 0; t2 <= t; ++t2) o += p[size_t(t) * T + t2] * v(t2, i);
          r.out[(size_t(b) * T + t) * C + size_t(h) * hs + i] = o;
        }
      }
      if (dout.empty()) continue;
      auto g = [&](int t, int i) { return f(dout[(size_t(b) * T + t) * C + size_t(h) * hs + i]); };
      auto dq = [&](int t, int i) -> double& {
        return r.dqkv[(size_t(b) * T + t) * C3 + size_t(h) * hs + i];
      };
      auto dk = [&](int t, int i) -> double& { return dq(t, i + C); };
      auto dv = [&](int t, int i) -> double& { return dq(t, i + 2 * C); };
      for (int t = 0; t < T; ++t) {
        double dot = 0.0;
        for (int t2 = 0; t2 <= t; ++t2) {
          double d = 0.0;
          for (int i = 0; i < hs; ++i) d += g(t, i) * v(t2, i);
          dp[size_t(t) * T + t2] = d;
          dot += p[size_t(t) * T + t2] * d;
        }
        for (int t2 = 0; t2 <= t; ++t2) {
          const double pt = p[size_t(t) * T + t2];
          const double ds = pt * (dp[size_t(t) * T + t2] - dot) * scale;
          for (int i = 0; i < hs; ++i) {
            dq(t, i) += ds * k(t2, i);
            dk(t2, i) += ds * q(t, i);
            dv(t2, i) += pt * g(t, i);
          }
        }
      }
    }
  return r;
}

// max |got - want| / max |want| over the elements where `use` holds.
template <typename Got, typename Use>
double relative_error(const std::vector<Got>& got, const std::vector<double>& want, Use use) {
  double err = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!use(i)) continue;
    double g;
    if constexpr (std::is_same_v<Got, bf16>)
      g = f(got[i]);
    else
      g = double(got[i]);
    err = std::max(
        err, std::isnan(g) ? std::numeric_limits<double>::infinity() : std::fabs(g - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return scale > 0.0 ? err / scale : err;
}
auto every_element = [](size_t) { return true; };

// Tolerances. Inputs are bf16, products and sums fp32, and the output is
// rounded once to bf16 (2^-9 = 0.2% relative): the forward output and the
// gradients must be within 1% of the largest reference magnitude. The
// probabilities (and backward's dS) enter the tensor-core products as bf16,
// one more 2^-9 relative rounding per term, which the unfused CPU bf16 kernels
// also pay (its probabilities are stored in bf16); its error, measured beside,
// is of the same order. lse is fp32 from the bf16-rounded probabilities'
// sum: within 2^-8 absolute (a relative sum error of 2^-9, twice over).
constexpr double kRelTol = 1e-2;
// And no worse than twice the unfused kernels' error plus one bf16 rounding
// (the fused kernels round as many times per term; the slack covers another
// summation order, e.g. a tensor core's).
constexpr double kVsUnfused = 2.0, kOneRounding = 1.0 / 512;
constexpr double kLseTol = 1.0 / 256;

class FlashAttentionGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::device_available(&reason))
      GTEST_SKIP() << "the flash attention kernels need a CUDA device (or the emulation build "
                      "-DSRKIT_CUDA_EMU=ON): "
                   << reason;
    stream_ = cuda::stream_create();
  }
  void TearDown() override {
    if (stream_) cuda::stream_destroy(stream_);
  }
  cuda::Stream stream_ = nullptr;
};
class FlashAttentionShapes : public FlashAttentionGpu,
                             public ::testing::WithParamInterface<Shape> {};

// The unfused CPU bf16 kernels' forward: out, and att for their backward.
struct CpuRun {
  std::vector<bf16> out, att, dqkv;
};
CpuRun cpu_run(const Shape& s, const std::vector<bf16>& x, const std::vector<bf16>& dout) {
  CpuRun c;
  c.out.resize(s.rows());
  c.att.resize(s.heads() * size_t(s.T));
  cpu::attention_forward<bf16>(c.out.data(), c.att.data(), x.data(), s.B, s.T, s.C(), s.NH);
  if (!dout.empty()) {
    c.dqkv.resize(s.qkv());
    cpu::attention_backward<bf16>(c.dqkv.data(), GradWrite::kOverwrite, dout.data(), x.data(),
                                  c.att.data(), s.B, s.T, s.C(), s.NH);
  }
  return c;
}

TEST_P(FlashAttentionShapes, ForwardMatchesTheReference) {
  const Shape s = GetParam();
  const std::vector<bf16> x = make_qkv(s, 1);
  DeviceBuffer qkv(x), out(s.rows() * 2), lse(s.heads() * 4);
  cuda::flash_attention_forward(DType::kBF16, out.ptr, static_cast<float*>(lse.ptr), qkv.ptr, s.B,
                                s.T, s.C(), s.NH, stream_);
  const std::vector<bf16> got = out.host<bf16>();
  const std::vector<float> got_lse = lse.host<float>();
  const Reference ref = reference(s, x, {});
  const CpuRun cpu = cpu_run(s, x, {});
  const double err = relative_error(got, ref.out, every_element);
  const double cpu_err = relative_error(cpu.out, ref.out, every_element);
  double lse_err = 0.0;
  for (size_t i = 0; i < ref.lse.size(); ++i)
    lse_err = std::max(lse_err, std::isnan(got_lse[i]) ? 1e30 : std::fabs(got_lse[i] - ref.lse[i]));
  std::printf("%s forward: flash error %.3g (lse %.3g), unfused CPU bf16 error %.3g\n",
              name(s).c_str(), err, lse_err, cpu_err);
  EXPECT_LE(err, kRelTol);
  EXPECT_LE(err, kVsUnfused * cpu_err + kOneRounding);
  EXPECT_LE(lse_err, kLseTol);
}

// Backward from forward's out and lse, into a NaN-filled dqkv (kOverwrite),
// then added to earlier values (kAccumulate): q, k and v parts each against
// the reference, and beside the unfused CPU bf16 kernels.
TEST_P(FlashAttentionShapes, BackwardMatchesTheReference) {
  const Shape s = GetParam();
  const std::vector<bf16> x = make_qkv(s, 2), dy = values(s.rows(), 3, -1.0f, 1.0f);
  const std::vector<bf16> old = values(s.qkv(), 4, -1.0f, 1.0f);
  DeviceBuffer qkv(x), g(dy), out(s.rows() * 2), lse(s.heads() * 4), dqkv(s.qkv() * 2);
  DeviceBuffer scratch(cuda::flash_attention_backward_scratch_bytes(s.B, s.T, s.NH));
  auto* lse_p = static_cast<float*>(lse.ptr);
  cuda::flash_attention_forward(DType::kBF16, out.ptr, lse_p, qkv.ptr, s.B, s.T, s.C(), s.NH,
                                stream_);
  cuda::flash_attention_backward(DType::kBF16, dqkv.ptr, GradWrite::kOverwrite, g.ptr, qkv.ptr,
                                 out.ptr, lse_p, scratch.ptr, s.B, s.T, s.C(), s.NH, stream_);
  const std::vector<bf16> got = dqkv.host<bf16>();
  DeviceBuffer dqkv_acc(old);
  cuda::flash_attention_backward(DType::kBF16, dqkv_acc.ptr, GradWrite::kAccumulate, g.ptr, qkv.ptr,
                                 out.ptr, lse_p, scratch.ptr, s.B, s.T, s.C(), s.NH, stream_);
  const std::vector<bf16> got_acc = dqkv_acc.host<bf16>();
  const Reference ref = reference(s, x, dy);
  const CpuRun cpu = cpu_run(s, x, dy);
  std::vector<double> want_acc(ref.dqkv.size());
  for (size_t i = 0; i < want_acc.size(); ++i) want_acc[i] = f(old[i]) + ref.dqkv[i];
  const size_t C = size_t(s.C());
  const char* parts[] = {"dq", "dk", "dv"};
  for (size_t part = 0; part < 3; ++part) {
    auto in_part = [&](size_t i) { return i % (3 * C) / C == part; };
    const double err = relative_error(got, ref.dqkv, in_part);
    const double acc_err = relative_error(got_acc, want_acc, in_part);
    const double cpu_err = relative_error(cpu.dqkv, ref.dqkv, in_part);
    std::printf("%s %s: flash error %.3g (accumulating %.3g), unfused CPU bf16 error %.3g\n",
                name(s).c_str(), parts[part], err, acc_err, cpu_err);
    EXPECT_LE(err, kRelTol) << parts[part];
    EXPECT_LE(err, kVsUnfused * cpu_err + kOneRounding) << parts[part];
    EXPECT_LE(acc_err, kRelTol) << parts[part] << " accumulating";
  }
}

// T = 1000 takes a few seconds in the emulation (most of it the backward).
INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttentionShapes,
                         ::testing::Values(Shape{1, 1, 1, 64}, Shape{2, 13, 3, 64},
                                           Shape{1, 130, 2, 64}, Shape{1, 257, 1, 64},
                                           Shape{1, 1000, 1, 64}, Shape{2, 13, 1, 128},
                                           Shape{1, 77, 2, 128}),
                         [](const ::testing::TestParamInfo<Shape>& i) { return name(i.param); });

// Bit-exact determinism: no gradient element is summed in a varying order.
TEST_F(FlashAttentionGpu, BackwardGivesTheSameBitsOnEveryRun) {
  for (const Shape s : {Shape{2, 130, 2, 64}, Shape{1, 77, 2, 128}}) {
    const std::vector<bf16> x = make_qkv(s, 5), dy = values(s.rows(), 6, -1.0f, 1.0f);
    DeviceBuffer qkv(x), g(dy), out(s.rows() * 2), lse(s.heads() * 4);
    DeviceBuffer scratch(cuda::flash_attention_backward_scratch_bytes(s.B, s.T, s.NH));
    auto* lse_p = static_cast<float*>(lse.ptr);
    cuda::flash_attention_forward(DType::kBF16, out.ptr, lse_p, qkv.ptr, s.B, s.T, s.C(), s.NH,
                                  stream_);
    std::vector<uint16_t> first;
    for (int run = 0; run < 3; ++run) {
      DeviceBuffer dqkv(s.qkv() * 2);
      scratch.fill(uint8_t(run));  // the scratch's contents must not matter
      cuda::flash_attention_backward(DType::kBF16, dqkv.ptr, GradWrite::kOverwrite, g.ptr, qkv.ptr,
                                     out.ptr, lse_p, scratch.ptr, s.B, s.T, s.C(), s.NH, stream_);
      const std::vector<uint16_t> bytes = dqkv.host<uint16_t>();
      if (run == 0)
        first = bytes;
      else
        EXPECT_TRUE(bytes == first) << name(s) << ": run " << run << " differs from run 0";
    }
  }
}

// Keys after a query never reach its row. NaN in every key and value from
// kRows = 64 on: the tiles of those keys lie wholly above the diagonal of the
// first query block, so they must not even be loaded there (a computed tile
// would spread the NaN through 0 * NaN in P V): out, lse and dq of queries 0..63
// keep their bits. Huge finite keys and values after query 70, inside the
// diagonal tile of queries 64..127: masked, so out, lse and dq of queries 0..70
// keep their bits.
void check_future_keys_do_not_reach(int hs, cuda::Stream stream) {
  const Shape s{1, 130, 1, hs};
  const int C = s.C();
  const std::vector<bf16> x = make_qkv(s, 7), dy = values(s.rows(), 8, -1.0f, 1.0f);
  struct Result {
    std::vector<uint16_t> out, dqkv;
    std::vector<float> lse;
  };
  auto run = [&](const std::vector<bf16>& inp) {
    DeviceBuffer qkv(inp), g(dy), out(s.rows() * 2), lse(s.heads() * 4), dqkv(s.qkv() * 2);
    DeviceBuffer scratch(cuda::flash_attention_backward_scratch_bytes(s.B, s.T, s.NH));
    auto* lse_p = static_cast<float*>(lse.ptr);
    cuda::flash_attention_forward(DType::kBF16, out.ptr, lse_p, qkv.ptr, s.B, s.T, C, s.NH, stream);
    cuda::flash_attention_backward(DType::kBF16, dqkv.ptr, GradWrite::kOverwrite, g.ptr, qkv.ptr,
                                   out.ptr, lse_p, scratch.ptr, s.B, s.T, C, s.NH, stream);
    return Result{out.host<uint16_t>(), dqkv.host<uint16_t>(), lse.host<float>()};
  };
  auto poisoned = [&](int first_key, bf16 value) {
    std::vector<bf16> p = x;
    for (int t = first_key; t < s.T; ++t)
      for (int c = C; c < 3 * C; ++c) p[size_t(t) * 3 * C + c] = value;
    return p;
  };
  const Result clean = run(x);
  const bf16 nan{0x7fc0}, huge = float_to_bf16_rn(1e30f);
  const struct {
    int first_key;
    bf16 value;
    const char* what;
  } cases[] = {{64, nan, "NaN from key 64"}, {71, huge, "1e30 from key 71"}};
  for (const auto& c : cases) {
    const Result r = run(poisoned(c.first_key, c.value));
    int changed = 0;
    for (int t = 0; t < c.first_key; ++t) {
      changed += std::memcmp(&r.lse[size_t(t)], &clean.lse[size_t(t)], 4) != 0;
      for (int i = 0; i < C; ++i) {
        changed += r.out[size_t(t) * C + i] != clean.out[size_t(t) * C + i];
        changed += r.dqkv[size_t(t) * 3 * C + i] != clean.dqkv[size_t(t) * 3 * C + i];  // dq
      }
    }
    EXPECT_EQ(changed, 0) << c.what << ", hs " << hs;
  }
}

TEST_F(FlashAttentionGpu, KeysAfterAQueryDoNotReachItsRowHs64) {
  check_future_keys_do_not_reach(64, stream_);
}
TEST_F(FlashAttentionGpu, KeysAfterAQueryDoNotReachItsRowHs128) {
  check_future_keys_do_not_reach(128, stream_);
}

}  // namespace
}  // namespace srkit
