// The one way the project launches a kernel:
//   srkit::cuda::launch(kernel, grid, block, shared_bytes, stream, "name", args...);
// It enqueues kernel(args...) on `stream` and checks the launch in one place: a
// rejected launch throws std::runtime_error naming the kernel. The real build
// uses <<<>>>; the emulation (SRKIT_CUDA_EMU) queues the kernel on the HIP CPU
// runtime's stream after checking the configuration a GPU would refuse, so that
// a bad grid fails in emulation too.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/cuda/compat.cuh"

namespace srkit::cuda {

// Throws std::runtime_error "<name> launch failed: <error>" when code != cudaSuccess.
void check_launch(int code, const char* name);

// Dynamic shared memory past the 48 KiB any block may take needs an opt-in per
// kernel. opt_in_shared_limit() is the most a block of the current device may
// opt into (cudaDevAttrMaxSharedMemoryPerBlockOptin: 227 KiB on sm_90, 163 KiB
// on sm_80); the emulation reports sm_90's, so that it takes the paths an
// H100 or H200 takes. opt_in_shared lets `kernel` launch with up to `bytes`
// (at most that limit); it throws std::runtime_error naming `name` if the
// device refuses. Both remember their answers (per device, and per kernel for
// the opt-in), so calling them before every launch costs a map lookup.
inline constexpr size_t kDefaultSharedBytes = 48 * 1024;
size_t opt_in_shared_limit();
void opt_in_shared_bytes(const void* kernel, size_t bytes, const char* name);
template <typename... Params>
void opt_in_shared(void (*kernel)(Params...), size_t bytes, const char* name) {
  opt_in_shared_bytes(reinterpret_cast<const void*>(kernel), bytes, name);
}

#if defined(SRKIT_CUDA_EMU)
// cudaErrorInvalidConfiguration unless grid and block are within CUDA's limits
// (block: 1..1024 threads, x, y <= 1024, z <= 64; grid: x < 2^31, y, z <= 65535;
// dynamic shared memory <= 48 KiB, or up to what opt_in_shared allowed `kernel`).
int emulated_launch_status(const void* kernel, dim3 grid, dim3 block, size_t shared_bytes);
#endif

// Grid-stride loops (casts, element maps, the embedding): kGridStrideThreads
// a block and at most kGridStrideMaxBlocks blocks, enough to fill any current
// GPU several times over, few enough that each thread loops a while.
inline constexpr int kGridStrideThreads = 256;
inline constexpr size_t kGridStrideMaxBlocks = 8192;
inline unsigned grid_stride_blocks(size_t work_items) {
  return unsigned(std::max<size_t>(
      1,
      std::min(kGridStrideMaxBlocks, (work_items + kGridStrideThreads - 1) / kGridStrideThreads)));
}
__device__ __forceinline__ size_t grid_thread_index() {
  return size_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ size_t grid_thread_count() { return size_t(gridDim.x) * blockDim.x; }

template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, Stream stream,
            const char* name, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "launch: wrong number of kernel arguments");
#if defined(SRKIT_CUDA_EMU)
  check_launch(
      emulated_launch_status(reinterpret_cast<const void*>(kernel), grid, block, shared_bytes),
      name);
  // Arguments are converted to the kernel's parameter types here, as <<<>>> does.
  hipLaunchKernelGGL(kernel, grid, block, static_cast<std::uint32_t>(shared_bytes), stream,
                     static_cast<Params>(std::forward<Args>(args))...);
#else
  // clang-format would split the launch chevrons.
  // clang-format off
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  // clang-format on
  check_launch(cudaGetLastError(), name);
#endif
}

}  // namespace srkit::cuda
