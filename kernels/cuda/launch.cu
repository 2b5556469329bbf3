#include <stdexcept>
#include <string>

#include "kernels/cuda/launch.cuh"

#if defined(SRKIT_CUDA_EMU)
#include <map>
#include <mutex>
#endif

namespace srkit::cuda {

void check_launch(int code, const char* name) {
  if (code != cudaSuccess) {
    throw std::runtime_error(std::string(name) + " launch failed: " +
                             cudaGetErrorString(static_cast<cudaError_t>(code)));
  }
}

#if defined(SRKIT_CUDA_EMU)
namespace {
// sm_90's cudaDevAttrMaxSharedMemoryPerBlockOptin.
constexpr size_t kEmulatedOptInLimit = 227 * 1024;

// What opt_in_shared allowed each kernel, as a GPU's function attribute would
// remember it.
std::mutex& opt_in_mutex() {
  static std::mutex m;
  return m;
}
std::map<const void*, size_t>& opt_ins() {
  static std::map<const void*, size_t> m;
  return m;
}

size_t allowed_shared_bytes(const void* kernel) {
  std::lock_guard<std::mutex> lock(opt_in_mutex());
  const auto it = opt_ins().find(kernel);
  return it == opt_ins().end() ? kDefaultSharedBytes : std::max(kDefaultSharedBytes, it->second);
}
}  // namespace

size_t opt_in_shared_limit() { return kEmulatedOptInLimit; }

void opt_in_shared_bytes(const void* kernel, size_t bytes, const char* name) {
  if (bytes > kEmulatedOptInLimit) check_launch(cudaErrorInvalidValue, name);
  std::lock_guard<std::mutex> lock(opt_in_mutex());
  opt_ins()[kernel] = bytes;
}

int emulated_launch_status(const void* kernel, dim3 grid, dim3 block, size_t shared_bytes) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  const bool block_ok =
      threads >= 1 && threads <= 1024 && block.x <= 1024 && block.y <= 1024 && block.z <= 64;
  const bool grid_ok = grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= 0x7fffffffu &&
                       grid.y <= 65535 && grid.z <= 65535;
  const bool shared_ok = shared_bytes <= allowed_shared_bytes(kernel);
  return block_ok && grid_ok && shared_ok ? cudaSuccess : cudaErrorInvalidConfiguration;
}
#else
size_t opt_in_shared_limit() {
  int device = 0, bytes = 0;
  check_launch(cudaGetDevice(&device), "opt_in_shared_limit");
  check_launch(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
               "opt_in_shared_limit");
  return size_t(bytes);
}

void opt_in_shared_bytes(const void* kernel, size_t bytes, const char* name) {
  check_launch(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)), name);
}
#endif

}  // namespace srkit::cuda
