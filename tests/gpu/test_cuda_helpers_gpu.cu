// The helpers every kernel builds on (kernels/cuda/launch.cuh, warp.cuh and
// SRKIT_DYNAMIC_SHARED of compat.cuh) against what CUDA defines, on a GPU and in
// the CPU emulation: shuffles by lane (modulo 32) and by xor, warp and block
// sums and maxima, dynamic shared memory, work queued on a destroyed stream, the
// alignment of device memory, and a launch a GPU refuses. Blocks of 96 threads
// cover both halves of the emulation's 64-lane warp and a lone warp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/compat.cuh"
#include "kernels/cuda/device.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/warp.cuh"

namespace srkit {
namespace {

// Per thread: [0] the value of lane (7 * lane + 3) (mod 32), [1] of lane ^ 5,
// [2] warp sum, [3] warp max, [4] block sum, [5] block max.
constexpr int kOutputs = 6;

__global__ void warp_ops(const float* x, float* out) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const float v = x[i];
  const int lane = cuda::lane_id();
  float* o = out + i * kOutputs;
  o[0] = cuda::warp_shfl(v, 7 * lane + 3);
  o[1] = cuda::warp_shfl_xor(v, 5);
  o[2] = cuda::warp_sum(v);
  o[3] = cuda::warp_max(v);
  o[4] = cuda::block_sum(v);
  o[5] = cuda::block_max(v, -INFINITY);
}

// Reverses each block's inputs through dynamic shared memory. Each kTag is a
// kernel of its own, for the opt-in a kernel keeps once given.
template <int kTag = 0>
__global__ void reverse_in_block(const float* x, float* y) {
  SRKIT_DYNAMIC_SHARED(float, buf);
  const unsigned t = threadIdx.x, n = blockDim.x;
  buf[t] = x[blockIdx.x * n + t];
  __syncthreads();
  y[blockIdx.x * n + t] = buf[n - 1 - t];
}

class CudaHelpersGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::device_available(&reason)) GTEST_SKIP() << reason;
  }
};

// Integers, so every order of summation gives the same exact float.
std::vector<float> inputs(size_t n) {
  std::vector<float> x(n);
  uint64_t s = 12345;
  for (float& v : x) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v = float(int64_t(s >> 53) - 1024);
  }
  return x;
}

struct Buffer {
  explicit Buffer(size_t n) : n(n), p(static_cast<float*>(cuda::device_malloc(n * 4))) {}
  ~Buffer() { cuda::device_free(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  size_t n;
  float* p;
};

TEST_F(CudaHelpersGpu, WarpAndBlockPrimitivesFollowCuda) {
  for (const int threads : {96, 256}) {
    const int blocks = 3;
    const size_t n = size_t(blocks) * size_t(threads);
    const std::vector<float> x = inputs(n);
    Buffer dx(n), dout(n * kOutputs);
    cuda::copy_to_device(dx.p, x.data(), n * 4);
    cuda::launch(warp_ops, blocks, threads, 0, nullptr, "warp_ops", dx.p, dout.p);
    std::vector<float> got(n * kOutputs);
    cuda::copy_to_host(got.data(), dout.p, got.size() * 4);
    for (size_t i = 0; i < n; ++i) {
      const size_t warp = i / 32 * 32, lane = i % 32, block = i / size_t(threads) * size_t(threads);
      float wsum = 0.0f, wmax = -INFINITY, bsum = 0.0f, bmax = -INFINITY;
      for (size_t l = 0; l < 32; ++l) wmax = std::max(wmax, x[warp + l]);
      for (size_t t = 0; t < size_t(threads); ++t) bmax = std::max(bmax, x[block + t]);
      // Sums of integers below 2^24: exact in any order.
      for (size_t l = 0; l < 32; ++l) wsum += x[warp + l];
      for (size_t t = 0; t < size_t(threads); ++t) bsum += x[block + t];
      const float want[kOutputs] = {
          x[warp + (7 * lane + 3) % 32], x[warp + (lane ^ 5)], wsum, wmax, bsum, bmax};
      for (int k = 0; k < kOutputs; ++k) {
        ASSERT_EQ(got[i * kOutputs + size_t(k)], want[k])
            << "output " << k << " of thread " << i << ", blocks of " << threads;
      }
    }
  }
}

TEST_F(CudaHelpersGpu, DynamicSharedMemory) {
  const int blocks = 4, threads = 160;
  const size_t n = size_t(blocks) * threads;
  const std::vector<float> x = inputs(n);
  Buffer dx(n), dy(n);
  cuda::copy_to_device(dx.p, x.data(), n * 4);
  cuda::launch(reverse_in_block<>, blocks, threads, threads * sizeof(float), nullptr,
               "reverse_in_block", dx.p, dy.p);
  std::vector<float> y(n);
  cuda::copy_to_host(y.data(), dy.p, n * 4);
  for (size_t i = 0; i < n; ++i) {
    const size_t b = i / threads, t = i % threads;
    ASSERT_EQ(y[i], x[b * threads + (threads - 1 - t)]) << i;
  }
}

// More than the default 48 KiB needs the kernel's opt-in, as on a GPU, and
// then works up to the device's limit.
TEST_F(CudaHelpersGpu, SharedMemoryPastTheDefaultNeedsTheKernelsOptIn) {
  const int threads = 256;
  const size_t big = 64 * 1024;
  ASSERT_GE(cuda::opt_in_shared_limit(), big) << "sm_80 and later opt into at least 163 KiB";
  const std::vector<float> x = inputs(threads);
  Buffer dx(threads), dy(threads);
  cuda::copy_to_device(dx.p, x.data(), threads * 4);
  auto* kernel = reverse_in_block<1>;
  try {
    cuda::launch(kernel, 1, threads, big, nullptr, "reverse_in_block<1>", dx.p, dy.p);
    cuda::synchronize();
    FAIL() << "64 KiB of dynamic shared memory was accepted without the kernel's opt-in";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("reverse_in_block<1>"), std::string::npos) << e.what();
  }
  cuda::opt_in_shared(kernel, big, "reverse_in_block<1>");
  cuda::launch(kernel, 1, threads, big, nullptr, "reverse_in_block<1>", dx.p, dy.p);
  std::vector<float> y(threads);
  cuda::copy_to_host(y.data(), dy.p, threads * 4);
  for (int t = 0; t < threads; ++t) ASSERT_EQ(y[size_t(t)], x[size_t(threads - 1 - t)]) << t;
  EXPECT_THROW(cuda::opt_in_shared(kernel, cuda::opt_in_shared_limit() + 1, "reverse_in_block<1>"),
               std::runtime_error);
}

// CUDA finishes the work queued on a stream that is destroyed before it ran.
TEST_F(CudaHelpersGpu, WorkQueuedOnADestroyedStreamStillRuns) {
  const int threads = 128;
  const std::vector<float> x = inputs(threads), poison(threads, -1.0f);
  Buffer dx(threads), dy(threads);
  cuda::copy_to_device(dx.p, x.data(), threads * 4);
  cuda::copy_to_device(dy.p, poison.data(), threads * 4);
  const cuda::Stream stream = cuda::stream_create();
  cuda::launch(reverse_in_block<>, 1, threads, threads * sizeof(float), stream, "reverse_in_block",
               dx.p, dy.p);
  cuda::stream_destroy(stream);
  cuda::synchronize();
  std::vector<float> y(threads);
  cuda::copy_to_host(y.data(), dy.p, threads * 4);
  for (int t = 0; t < threads; ++t) ASSERT_EQ(y[size_t(t)], x[size_t(threads - 1 - t)]) << t;
}

// cudaMalloc's memory is aligned to at least 256 bytes (cuBLASLt's algorithms
// assume as much by default).
TEST_F(CudaHelpersGpu, DeviceMemoryIs256ByteAligned) {
  for (size_t bytes : {size_t(1), size_t(2), size_t(100), size_t(4096), size_t(1) << 20}) {
    void* p[3];
    for (void*& q : p) {
      q = cuda::device_malloc(bytes);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 256, 0u) << bytes << " bytes";
    }
    for (void* q : p) cuda::device_free(q);
  }
}

TEST_F(CudaHelpersGpu, RefusedLaunchThrowsNamingTheKernel) {
  Buffer x(2048), y(2048);
  try {
    cuda::launch(reverse_in_block<>, 1, 2048, 2048 * sizeof(float), nullptr, "reverse_in_block",
                 x.p, y.p);
    cuda::synchronize();
    FAIL() << "a 2048-thread block was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("reverse_in_block"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace srkit
