// srkit::cuda::Stream: the stream type of the CUDA launchers, spelled without
// CUDA headers so that plain C++ callers (lib/, tests, benchmarks) can hold and
// pass one. It is the native stream type of each build, not a wrapper:
// cudaStream_t (CUstream_st*) under the real runtime, hipStream_t in the CPU
// emulation (SRKIT_CUDA_EMU); kernels/cuda/compat.cuh checks that both match.
// nullptr is the default stream (CUDA's legacy default stream).
#pragma once

#if defined(SRKIT_CUDA_EMU)
#include <future>
#include <vector>

// HIP-CPU's stream is Flat_combiner<std::vector<Task>>, Task being
// std::packaged_task<void(bool&)> (src/include/hip/detail/stream.hpp, task.hpp).
namespace hip::detail {
template <typename T>
class Flat_combiner;
}  // namespace hip::detail

namespace srkit::cuda {
using Stream = hip::detail::Flat_combiner<std::vector<std::packaged_task<void(bool&)>>>*;
}  // namespace srkit::cuda
#else
struct CUstream_st;

namespace srkit::cuda {
using Stream = CUstream_st*;
}  // namespace srkit::cuda
#endif
