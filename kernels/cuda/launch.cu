#include <stdexcept>
#include <string>

#include "kernels/cuda/launch.cuh"

namespace srkit::cuda {

void check_launch(int code, const char* name) {
  if (code != cudaSuccess) {
    throw std::runtime_error(std::string(name) + " launch failed: " +
                             cudaGetErrorString(static_cast<cudaError_t>(code)));
  }
}

#if defined(SRKIT_CUDA_EMU)
int emulated_launch_status(dim3 grid, dim3 block, size_t shared_bytes) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  const bool block_ok =
      threads >= 1 && threads <= 1024 && block.x <= 1024 && block.y <= 1024 && block.z <= 64;
  const bool grid_ok = grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= 0x7fffffffu &&
                       grid.y <= 65535 && grid.z <= 65535;
  const bool shared_ok = shared_bytes <= 48 * 1024;
  return block_ok && grid_ok && shared_ok ? cudaSuccess : cudaErrorInvalidConfiguration;
}
#endif

}  // namespace srkit::cuda
