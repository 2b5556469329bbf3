// Self-test of the CPU emulation: small kernels with planted defects that a
// GPU may or may not expose (races, wrong lanes, missing synchronisation) must
// fail in the emulation every time, and their correct versions must pass. If
// the emulation ever stopped catching one (a change of HIP-CPU, of the mapping
// header or of the warp helpers), this test says which.
//
// How each defect shows: a block runs its threads as fibers that switch only at
// a __syncthreads or a warp shuffle, in thread order, so a missing
// __syncthreads lets a thread read shared memory its neighbours have not
// written yet; shuffles read exactly the lane asked for; kernels and copies run
// on a worker thread, so a host read that does not synchronise runs before the
// work it depends on (made certain here: the kernel waits for a flag that the
// host raises only after its read). Each check runs several times on fresh data.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda/compat.cuh"
#include "kernels/cuda/device.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/warp.cuh"
#include "tests/gpu/device_vector.h"
#include "tests/gpu/mma_gemm_kernel.cuh"

namespace srkit {
namespace {

template <typename T>
using Device = test::DeviceVector<T>;

constexpr int kRepeats = 5;
constexpr int kThreads = 256;

// Integers, so that every order of summation gives the same exact float.
std::vector<float> data(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = float(int64_t(s >> 54) - 512);
  }
  return v;
}

// ---- block reduction: a missing __syncthreads ------------------------------------

// Shared-memory tree sum of each block's 256 inputs. kSyncEachLevel = false is
// the planted defect: no barrier between the levels of the tree.
template <bool kSyncEachLevel>
__global__ void tree_sum(const float* x, float* out) {
  __shared__ float sh[kThreads];
  const int t = int(threadIdx.x);
  sh[t] = x[blockIdx.x * kThreads + t];
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (t < s) sh[t] += sh[t + s];
    if (kSyncEachLevel) __syncthreads();
  }
  if (kSyncEachLevel == false) __syncthreads();
  if (t == 0) out[blockIdx.x] = sh[0];
}

// The project's helper (warp shuffles, then one value per warp).
__global__ void helper_sum(const float* x, float* out) {
  const float total = cuda::block_sum(x[blockIdx.x * blockDim.x + threadIdx.x]);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}

// Blocks whose sum differs from the exact one.
int wrong_block_sums(void (*kernel)(const float*, float*), uint64_t seed) {
  const int blocks = 24;
  const std::vector<float> x = data(size_t(blocks) * kThreads, seed);
  Device<float> dx(x), dout(blocks);
  cuda::launch(kernel, blocks, kThreads, 0, nullptr, "sum", dx.p, dout.p);
  const std::vector<float> got = dout.host();
  int wrong = 0;
  for (int b = 0; b < blocks; ++b) {
    float want = 0.0f;
    for (int t = 0; t < kThreads; ++t) want += x[size_t(b) * kThreads + t];
    wrong += got[size_t(b)] != want;
  }
  return wrong;
}

TEST(EmulationSelfTest, BlockReductionMissingSyncthreadsIsWrong) {
  int fewest = 1 << 30;
  for (int r = 0; r < kRepeats; ++r) {
    EXPECT_EQ(wrong_block_sums(tree_sum<true>, 100 + r), 0) << "correct tree, run " << r;
    EXPECT_EQ(wrong_block_sums(helper_sum, 200 + r), 0) << "cuda::block_sum, run " << r;
    const int wrong = wrong_block_sums(tree_sum<false>, 300 + r);
    EXPECT_GT(wrong, 0) << "the missing __syncthreads went unnoticed, run " << r;
    fewest = std::min(fewest, wrong);
  }
  std::printf(
      "planted missing __syncthreads: at least %d of 24 block sums wrong in each of %d runs\n",
      fewest, kRepeats);
}

// ---- warp shuffle: a wrong source lane -------------------------------------------

// Every lane takes the value of lane 4 * j + lane / 8 (how AdamW spreads one
// Philox block over 8 lanes), for j = 0..7. kLaneOffByOne is the planted
// defect: lane / 8 + 1.
template <bool kLaneOffByOne>
__global__ void spread(const uint32_t* x, uint32_t* out) {
  const int lane = cuda::lane_id();
  const uint32_t mine = x[blockIdx.x * blockDim.x + threadIdx.x];
  for (int j = 0; j < 8; ++j) {
    const int src = 4 * j + lane / 8 + (kLaneOffByOne ? 1 : 0);
    out[(blockIdx.x * blockDim.x + threadIdx.x) * 8 + unsigned(j)] = cuda::warp_shfl(mine, src);
  }
}

// Elements that differ from the CUDA semantics of the shuffles (source lane
// modulo 32, within the caller's warp). 96-thread blocks: both halves of the
// emulation's 64-lane warp and a lone warp after them.
int wrong_spread(void (*kernel)(const uint32_t*, uint32_t*), uint64_t seed) {
  const int blocks = 5, threads = 96;
  std::vector<uint32_t> x(size_t(blocks) * threads);
  uint64_t s = seed;
  for (uint32_t& v : x) v = uint32_t((s = s * 6364136223846793005ull + 1) >> 32);
  Device<uint32_t> dx(x), dout(x.size() * 8);
  cuda::launch(kernel, blocks, threads, 0, nullptr, "spread", dx.p, dout.p);
  const std::vector<uint32_t> got = dout.host();
  int wrong = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t warp_base = i / 32 * 32, lane = i % 32;
    for (int j = 0; j < 8; ++j) wrong += got[i * 8 + size_t(j)] != x[warp_base + 4 * j + lane / 8];
  }
  return wrong;
}

// A butterfly sum over each warp; every lane gets its warp's total.
__global__ void warp_totals(const float* x, float* out) {
  const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = cuda::warp_sum(x[i]);
}

TEST(EmulationSelfTest, WrongShuffleLaneIsWrong) {
  int fewest = 1 << 30;
  for (int r = 0; r < kRepeats; ++r) {
    EXPECT_EQ(wrong_spread(spread<false>, 400 + r), 0) << "correct lanes, run " << r;
    const int wrong = wrong_spread(spread<true>, 500 + r);
    EXPECT_GT(wrong, 0) << "the wrong lane went unnoticed, run " << r;
    fewest = std::min(fewest, wrong);
  }
  std::printf("planted wrong shuffle lane: at least %d of %d values wrong in each of %d runs\n",
              fewest, 5 * 96 * 8, kRepeats);
  const std::vector<float> x = data(3 * 96, 600);
  Device<float> dx(x), dout(x.size());
  cuda::launch(warp_totals, 3, 96, 0, nullptr, "warp_totals", dx.p, dout.p);
  const std::vector<float> got = dout.host();
  for (size_t w = 0; w < x.size() / 32; ++w) {
    float want = 0.0f;
    for (size_t l = 0; l < 32; ++l) want += x[w * 32 + l];
    for (size_t l = 0; l < 32; ++l) ASSERT_EQ(got[w * 32 + l], want) << "warp " << w;
  }
}

// ---- tensor-core fragments: a wrong layout, a missing barrier between tiles ----

// Elements of a 32x32x64 GEMM through kernels/cuda/mma_fragment.cuh that differ
// from the exact result (small integers: every order of summation is exact).
int wrong_mma_gemm(void (*kernel)(const float*, const float*, float*, int, int), uint64_t seed) {
  const int m = 32, n = 32, k = 64;
  std::vector<float> a = data(size_t(m) * k, seed), b = data(size_t(k) * n, seed + 1);
  for (float& v : a) v = float(int(v) % 4);  // -3..3: exact in bf16, sums exact in fp32
  for (float& v : b) v = float(int(v) % 4);
  Device<float> da(a), db(b), dc(size_t(m) * n);
  const dim3 grid(unsigned(n / (8 * test::kMmaWarps)), unsigned(m / 16));
  cuda::launch(kernel, grid, dim3(32 * test::kMmaWarps), 0, nullptr, "mma_gemm", da.p, db.p, dc.p,
               n, k);
  const std::vector<float> got = dc.host();
  int wrong = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float want = 0.0f;
      for (int kk = 0; kk < k; ++kk) want += a[size_t(i) * k + kk] * b[size_t(kk) * n + j];
      wrong += got[size_t(i) * n + j] != want;
    }
  return wrong;
}

TEST(EmulationSelfTest, MmaFragmentWrongLayoutIsWrong) {
  int fewest = 1 << 30;
  for (int r = 0; r < kRepeats; ++r) {
    EXPECT_EQ(wrong_mma_gemm(test::mma_gemm<false, false>, 700 + r), 0) << "correct, run " << r;
    const int wrong = wrong_mma_gemm(test::mma_gemm<false, false, true, true>, 800 + r);
    EXPECT_GT(wrong, 0) << "the wrong lane-to-element mapping went unnoticed, run " << r;
    fewest = std::min(fewest, wrong);
  }
  std::printf(
      "planted wrong fragment layout: at least %d of 1024 elements wrong in each of %d runs\n",
      fewest, kRepeats);
}

TEST(EmulationSelfTest, MmaFragmentMissingBarrierBetweenTilesIsWrong) {
  int fewest = 1 << 30;
  for (int r = 0; r < kRepeats; ++r) {
    EXPECT_EQ(wrong_mma_gemm(test::mma_gemm<true, true>, 900 + r), 0) << "correct, run " << r;
    const int wrong = wrong_mma_gemm(test::mma_gemm<true, true, false, false>, 1000 + r);
    EXPECT_GT(wrong, 0) << "the missing barrier between tile loads went unnoticed, run " << r;
    fewest = std::min(fewest, wrong);
  }
  std::printf(
      "planted missing tile barrier: at least %d of 1024 elements wrong in each of %d runs\n",
      fewest, kRepeats);
}

// ---- host reads without a synchronise ----------------------------------------------

// Waits until the host raises *flag (at most 10 s: then writes -1 so that a
// hang becomes a failure), then writes `value`.
__global__ void after_flag(int* flag, float* out, float value) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::atomic_ref<int>(*flag).load() == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      *out = -1.0f;
      return;
    }
    std::this_thread::yield();
  }
  *out = value;
}

struct Flag {
  Flag() { *p = 0; }
  void raise() { std::atomic_ref<int>(*p).store(1); }
  Device<int> d{1};
  int* p = d.p;
};

TEST(EmulationSelfTest, KernelResultReadWithoutSynchroniseIsStale) {
  for (int r = 0; r < kRepeats; ++r) {
    Flag flag;
    Device<float> out(std::vector<float>{0.0f});
    const cuda::Stream stream = cuda::stream_create();
    cuda::launch(after_flag, 1, 1, 0, stream, "after_flag", flag.p, out.p, 42.0f + float(r));
    // Device memory is host memory here: the defect is reading it now.
    const float early = std::atomic_ref<float>(*out.p).load();
    flag.raise();
    cuda::stream_synchronize(stream);
    const float late = *out.p;
    EXPECT_EQ(early, 0.0f) << "a read before the synchronise saw the result, run " << r;
    EXPECT_EQ(late, 42.0f + float(r)) << "run " << r;
    cuda::stream_destroy(stream);
  }
}

TEST(EmulationSelfTest, AsyncCopyReadWithoutSynchroniseIsStale) {
  for (int r = 0; r < kRepeats; ++r) {
    Flag flag;
    Device<float> out(std::vector<float>{0.0f});
    const cuda::Stream stream = cuda::stream_create();
    float host = -5.0f;
    cuda::launch(after_flag, 1, 1, 0, stream, "after_flag", flag.p, out.p, 7.0f + float(r));
    cuda::check(cudaMemcpyAsync(&host, out.p, sizeof host, cudaMemcpyDeviceToHost, stream),
                "cudaMemcpyAsync");
    const float early = std::atomic_ref<float>(host).load();
    flag.raise();
    cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    EXPECT_EQ(early, -5.0f) << "a read before the synchronise saw the copy, run " << r;
    EXPECT_EQ(host, 7.0f + float(r)) << "run " << r;
    cuda::stream_destroy(stream);
  }
}

// The H2D staging of compat.cuh: a host source may be reused as soon as
// cudaMemcpyAsync returns (CUDA's pageable-memory behaviour).
TEST(EmulationSelfTest, HostSourceOfAsyncCopyIsStagedAtTheCall) {
  Flag flag;
  Device<float> out(std::vector<float>{0.0f}), dst(std::vector<float>{0.0f});
  const cuda::Stream stream = cuda::stream_create();
  float src = 3.0f;
  cuda::launch(after_flag, 1, 1, 0, stream, "after_flag", flag.p, out.p, 1.0f);
  cuda::check(cudaMemcpyAsync(dst.p, &src, sizeof src, cudaMemcpyHostToDevice, stream),
              "cudaMemcpyAsync");
  src = 99.0f;
  flag.raise();
  cuda::stream_synchronize(stream);
  EXPECT_EQ(dst.host()[0], 3.0f);
  cuda::stream_destroy(stream);
}

TEST(EmulationSelfTest, DeviceSaysItIsEmulated) {
  EXPECT_TRUE(cuda::device_available());
  EXPECT_NE(cuda::device_description().find("emulated on CPU"), std::string::npos);
}

}  // namespace
}  // namespace srkit
