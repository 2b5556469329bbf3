// The NCCL communicator with a world of one rank (an MPI singleton: no mpirun),
// on the stream of a device backend: each collective is issued after the work
// already queued on that stream and returns with its result in place. With one
// rank every reduction is the identity (a sum of one contribution; a mean that
// scales by 1/1), so results are exact. Skips without a device; in the CPU
// emulation NCCL is the emulated world of one.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/device.h"
#include "lib/comm/communicator.h"

namespace srkit {
namespace {

#if defined(SRKIT_HAVE_MPI)

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.001f * float(i) - 0.37f;
  return v;
}

template <typename T>
std::vector<T> download(const void* d, size_t n) {
  std::vector<T> h(n);
  cuda::copy_to_host(h.data(), d, n * sizeof(T));
  return h;
}

TEST(NcclCommunicatorGpu, WorldOfOneRunsOnTheBackendStream) {
  std::string reason;
  if (!cuda::device_available(&reason)) GTEST_SKIP() << reason;
  auto comm = make_communicator("nccl", 60.0);
  ASSERT_EQ(comm->name(), "nccl");
  ASSERT_EQ(comm->world_size(), 1);
  const cuda::Stream stream = cuda::stream_create();
  comm->use_stream(stream);

  const size_t n = 4099;
  const std::vector<float> x = ramp(n);
  std::vector<bf16> rn(n);
  for (size_t i = 0; i < n; ++i) rn[i] = float_to_bf16_rn(x[i]);
  void* f32 = cuda::device_malloc(n * 4);
  void* a = cuda::device_malloc(n * 2);
  void* b = cuda::device_malloc(n * 2);
  const std::vector<bf16> poison(n, bf16{0x7fc1});
  cuda::copy_to_device(f32, x.data(), n * 4);
  cuda::copy_to_device(b, poison.data(), n * 2);

  // The cast is queued on the stream and the reduce-scatter must start after it.
  cuda::cast_f32_to_bf16_rn(static_cast<const float*>(f32), static_cast<bf16*>(a), n, stream);
  comm->reduce_scatter(a, b, n, DType::kBF16, ReduceOp::kMean);
  std::vector<bf16> got = download<bf16>(b, n);
  EXPECT_EQ(std::memcmp(got.data(), rn.data(), n * 2), 0) << "reduce_scatter (mean, bf16)";

  comm->all_reduce(b, n, DType::kBF16, ReduceOp::kSum);
  comm->all_reduce(f32, n, DType::kF32, ReduceOp::kMean);
  got = download<bf16>(b, n);
  EXPECT_EQ(std::memcmp(got.data(), rn.data(), n * 2), 0) << "all_reduce (sum, bf16)";
  EXPECT_EQ(download<float>(f32, n), x) << "all_reduce (mean, fp32)";

  cuda::copy_to_device(a, poison.data(), n * 2);
  comm->all_gather(b, a, n, DType::kBF16);
  got = download<bf16>(a, n);
  EXPECT_EQ(std::memcmp(got.data(), rn.data(), n * 2), 0) << "all_gather";
  comm->broadcast(a, n * 2, 0);
  comm->barrier();
  EXPECT_THROW(comm->broadcast(a, n * 2, 1), std::invalid_argument);

  cuda::device_free(f32);
  cuda::device_free(a);
  cuda::device_free(b);
  comm.reset();
  cuda::stream_destroy(stream);
}

#endif  // without MPI there is no NCCL communicator (it is bootstrapped through MPI)

}  // namespace
}  // namespace srkit
