// The CUDA AdamW step against the CPU one: every stored bit equal for every
// preset (and SR-moment variants), on a shard of the flat buffer and on a
// range split into shards stepped separately; telemetry counts equal, sums
// equal to rounding. The step runs as the backend runs it: a plan uploaded
// once, telemetry left in device memory. Skips with the reason when no CUDA
// device is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/adamw.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/device.h"
#include "lib/precision.h"
#include "tests/adamw_element_reference.h"

namespace {

using namespace srkit;

const std::vector<std::string>& kSpecs = srkit::testing::kAdamWRuleSpecs;

// The six arrays of a rule as raw host bytes, filled with GPT-like values.
struct HostArrays {
  HostArrays(const AdamWRule& r, size_t n, uint64_t seed) {
    const AdamWArrayBytes b = adamw_array_bytes(r);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    auto fill = [&](std::vector<uint8_t>& buf, size_t es, DType t, auto value) {
      buf.resize(es * n);
      for (size_t i = 0; i < n; ++i) {
        const float x = value(i);
        if (t == DType::kF32) {
          std::memcpy(buf.data() + 4 * i, &x, 4);
        } else {
          const bf16 h = float_to_bf16_rn(x);
          std::memcpy(buf.data() + 2 * i, &h, 2);
        }
      }
    };
    fill(arrays[0], b.weights, r.weights,
         [&](size_t i) { return (i % 5 == 0 ? 1.0f : 0.0f) + 0.05f * normal(rng); });
    fill(arrays[1], b.grads, r.grads, [&](size_t i) { return i % 11 ? 1e-2f * normal(rng) : 0.f; });
    fill(arrays[3], b.m, r.m, [&](size_t) { return 1e-3f * normal(rng); });
    fill(arrays[4], b.v, r.v, [&](size_t) {
      const float s = 1e-2f * normal(rng);
      return s * s;
    });
    if (r.master == MasterKind::kF32) {  // master near the weights, w = RN(master)
      fill(arrays[2], 4, DType::kF32, [&](size_t i) {
        bf16 w;
        std::memcpy(&w, arrays[0].data() + 2 * i, 2);
        return bf16_to_float(w) + 1e-4f * normal(rng);
      });
    } else if (r.master == MasterKind::kRem16) {  // any 16-bit remainder is a valid master
      arrays[2].resize(2 * n);
      for (size_t i = 0; i < n; ++i) {
        const int16_t rem = int16_t(rng());
        std::memcpy(arrays[2].data() + 2 * i, &rem, 2);
      }
    }
    if (r.kahan) fill(arrays[5], 2, DType::kBF16, [&](size_t) { return 1e-5f * normal(rng); });
  }
  AdamWBuffers buffers(size_t offset, const AdamWArrayBytes& b) {
    const size_t es[6] = {b.weights, b.grads, b.master, b.m, b.v, b.kahan};
    void* p[6];
    for (int k = 0; k < 6; ++k)
      p[k] = arrays[k].empty() ? nullptr : arrays[k].data() + offset * es[k];
    return {p[0], p[1], p[2], p[3], p[4], p[5]};
  }
  std::vector<uint8_t> arrays[6];  // weights, grads, master, m, v, kahan
};

// Device copies of HostArrays.
struct DeviceArrays {
  explicit DeviceArrays(const HostArrays& h) {
    for (int k = 0; k < 6; ++k) {
      bytes[k] = h.arrays[k].size();
      if (!bytes[k]) continue;
      ptr[k] = cuda::device_malloc(bytes[k]);
      cuda::copy_to_device(ptr[k], h.arrays[k].data(), bytes[k]);
    }
  }
  ~DeviceArrays() {
    for (void* p : ptr) {
      if (p) cuda::device_free(p);
    }
  }
  DeviceArrays(const DeviceArrays&) = delete;
  DeviceArrays& operator=(const DeviceArrays&) = delete;
  AdamWBuffers buffers() const { return {ptr[0], ptr[1], ptr[2], ptr[3], ptr[4], ptr[5]}; }
  std::vector<uint8_t> download(int k) const {
    std::vector<uint8_t> out(bytes[k]);
    if (bytes[k]) cuda::copy_to_host(out.data(), ptr[k], bytes[k]);
    return out;
  }
  void* ptr[6] = {};
  size_t bytes[6] = {};
};

// One device allocation, freed on scope exit.
struct DeviceBlock {
  explicit DeviceBlock(size_t bytes) : bytes(bytes), ptr(cuda::device_malloc(bytes)) {}
  ~DeviceBlock() { cuda::device_free(ptr); }
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  size_t bytes;
  void* ptr;
};

// The step's plan of [begin, end) on the device, uploaded once.
struct DevicePlan : DeviceBlock {
  DevicePlan(const std::vector<ParamSegment>& segs, size_t begin, size_t end)
      : DeviceBlock(cuda::adamw_plan_bytes(segs.data(), segs.size(), begin, end)) {
    const std::vector<unsigned char> image =
        cuda::adamw_plan_image(segs.data(), segs.size(), begin, end);
    EXPECT_EQ(image.size(), bytes);
    cuda::copy_to_device(ptr, image.data(), image.size());
  }
};

AdamWHyper hyper(uint64_t step) {
  AdamWHyper h{};
  h.lr = 1e-3f;
  h.beta1 = 0.9f;
  h.beta2 = 0.95f;
  h.eps = 1e-8f;
  h.weight_decay = 0.1f;
  h.bias_correction1 = 1.0f - std::pow(h.beta1, float(step));
  h.bias_correction2 = 1.0f - std::pow(h.beta2, float(step));
  h.grad_scale = 0.75f;
  h.seed = 0xC0FFEE;
  h.step = step;
  return h;
}

// The step runs on a stream of its own, synchronised before results are read.
class AdamWGpu : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::device_available(&reason)) GTEST_SKIP() << reason;
    stream_ = cuda::stream_create();
  }
  void TearDown() override {
    if (stream_) cuda::stream_destroy(stream_);
  }
  cuda::Stream stream_ = nullptr;
};

// Three steps of [begin, n) on both devices: every stored bit and every
// telemetry count equal. Several thread blocks, segment boundaries inside SR
// groups and inside warp tiles, n not a multiple of a group.
void expect_steps_like_cpu(const std::string& spec, size_t begin, cuda::Stream stream) {
  const AdamWRule rule = strategy_from_string(spec).rule;
  const AdamWArrayBytes b = adamw_array_bytes(rule);
  const size_t n = 1000003;
  const std::vector<ParamSegment> segs = {
      {0, 100001, true}, {100001, 499, false}, {100500, 400000, true}, {500500, n - 500500, false}};
  HostArrays host(rule, n - begin, 7);
  DeviceArrays device(host);
  DevicePlan plan(segs, begin, n);
  DeviceBlock telemetry(sizeof(AdamWTelemetry));
  for (uint64_t step = 1; step <= 3; ++step) {
    const AdamWHyper h = hyper(step);
    AdamWTelemetry tc, tg;
    cpu::adamw_step(rule, host.buffers(0, b), segs.data(), segs.size(), begin, n, h, &tc);
    cuda::adamw_step(rule, device.buffers(), plan.ptr, begin, n, h, nullptr,
                     step == 2 ? nullptr : static_cast<AdamWTelemetry*>(telemetry.ptr), stream);
    cuda::stream_synchronize(stream);
    cuda::copy_to_host(&tg, telemetry.ptr, sizeof tg);
    const char* names[6] = {"weights", "grads", "master", "m", "v", "kahan"};
    for (int k = 0; k < 6; ++k) {
      EXPECT_TRUE(device.download(k) == host.arrays[k]) << names[k] << " differ at step " << step;
    }
    if (step == 2) continue;  // the no-telemetry path
    EXPECT_EQ(tg.n, tc.n);
    EXPECT_EQ(tg.nonzero, tc.nonzero);
    EXPECT_EQ(tg.erased, tc.erased);
    EXPECT_EQ(tg.m_stalled, tc.m_stalled);
    EXPECT_EQ(tg.v_stalled, tc.v_stalled);
    // The CPU sums squares in fp32 within 512-element tiles, the GPU in fp64.
    EXPECT_NEAR(tg.update_sq, tc.update_sq, 1e-5 * tc.update_sq);
    EXPECT_NEAR(tg.weight_sq, tc.weight_sq, 1e-5 * tc.weight_sq);
  }
}

// A shard starting mid SR group: every group steps element by element.
TEST_P(AdamWGpu, BitIdenticalToCpu) { expect_steps_like_cpu(GetParam(), 13, stream_); }

// A range starting on a group boundary with aligned arrays: whole groups move
// as 128-bit chunks, the groups cut by segment ends still step per element.
TEST_P(AdamWGpu, BitIdenticalToCpuInAlignedChunks) {
  expect_steps_like_cpu(GetParam(), 0, stream_);
}

TEST_P(AdamWGpu, ShardsStepLikeTheWholeRange) {
  // ZeRO-1: each rank steps its shard with its own plan; the shards together
  // store the bits of one unsharded CPU step (SR bits follow the global index).
  const AdamWRule rule = strategy_from_string(GetParam()).rule;
  const AdamWArrayBytes b = adamw_array_bytes(rule);
  const size_t n = 20011;
  const std::vector<ParamSegment> segs = {
      {0, 5003, true}, {5003, 7000, false}, {12003, 8008, true}};
  // Boundaries inside an SR group, inside a warp tile, and at a block tile.
  const size_t cuts[] = {0, 4099, 6147, 12003, 16384, n};
  HostArrays host(rule, n, 9);
  DeviceArrays device(host);
  const AdamWHyper h = hyper(5);
  cpu::adamw_step(rule, host.buffers(0, b), segs.data(), segs.size(), 0, n, h, nullptr);
  for (size_t s = 0; s + 1 < std::size(cuts); ++s) {
    DevicePlan plan(segs, cuts[s], cuts[s + 1]);
    AdamWBuffers shard = device.buffers();
    void** arrays[6] = {&shard.weights, &shard.grads, &shard.master,
                        &shard.m,       &shard.v,     &shard.kahan};
    const size_t es[6] = {b.weights, b.grads, b.master, b.m, b.v, b.kahan};
    for (int k = 0; k < 6; ++k) {
      if (*arrays[k]) *arrays[k] = static_cast<char*>(*arrays[k]) + cuts[s] * es[k];
    }
    cuda::adamw_step(rule, shard, plan.ptr, cuts[s], cuts[s + 1], h, nullptr, nullptr, stream_);
    cuda::stream_synchronize(stream_);  // before the plan is freed
  }
  const char* names[6] = {"weights", "grads", "master", "m", "v", "kahan"};
  for (int k = 0; k < 6; ++k) {
    EXPECT_TRUE(device.download(k) == host.arrays[k]) << names[k] << " differ";
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, AdamWGpu, ::testing::ValuesIn(kSpecs),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name;
                           for (char c : info.param) name += std::isalnum(c) ? c : '_';
                           return name;
                         });

TEST(AdamWGpuCalls, RejectsMalformedCallsWithoutTouchingTheDevice) {
  // Validation runs on the host first, so this holds with or without a GPU.
  const AdamWRule rule = strategy_from_string("bf16-sr").rule;
  const std::vector<ParamSegment> segs = {{0, 10, true}};
  AdamWBuffers none{};
  int host_word = 0;  // a non-null address the calls below must never reach
  void* p = &host_word;
  const AdamWBuffers some{p, p, nullptr, p, p, nullptr};
  // Missing buffers.
  EXPECT_THROW(cuda::adamw_step(rule, none, p, 0, 10, hyper(1), nullptr, nullptr, nullptr),
               std::invalid_argument);
  // No plan for a non-empty range.
  EXPECT_THROW(cuda::adamw_step(rule, some, nullptr, 0, 10, hyper(1), nullptr, nullptr, nullptr),
               std::invalid_argument);
  // begin > end, and a step past the random-bits contract.
  EXPECT_THROW(cuda::adamw_step(rule, some, p, 10, 0, hyper(1), nullptr, nullptr, nullptr),
               std::invalid_argument);
  EXPECT_THROW(
      cuda::adamw_step(rule, some, p, 0, 10, hyper(kSrMaxStep + 1), nullptr, nullptr, nullptr),
      std::invalid_argument);
  // Segments that end before the range does, or do not start at 0.
  EXPECT_THROW(cuda::adamw_plan_image(segs.data(), 1, 0, 20), std::invalid_argument);
  EXPECT_THROW(cuda::adamw_plan_bytes(segs.data(), 1, 0, 20), std::invalid_argument);
  const ParamSegment late{5, 10, true};
  EXPECT_THROW(cuda::adamw_plan_image(&late, 1, 5, 15), std::invalid_argument);
}

}  // namespace
