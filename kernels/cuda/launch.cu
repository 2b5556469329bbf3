// Launch checks and the shared-memory opt-in (kernels/cuda/launch.cuh).
#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/cuda/launch.cuh"

namespace srkit::cuda {

void check_launch(int code, const char* name) {
  if (code != cudaSuccess) {
    throw std::runtime_error(std::string(name) + " launch failed: " +
                             cudaGetErrorString(static_cast<cudaError_t>(code)));
  }
}

namespace {
// What opt_in_shared allowed each kernel on each device, as the device's
// function attribute remembers it: a launcher may call opt_in_shared before
// every launch (the classifier does) and the driver is asked once per kernel
// and device. The limits never change while the process runs, so they are
// asked once per device too.
struct SharedCache {
  std::mutex mutex;
  std::map<std::pair<int, const void*>, size_t> opt_ins;
  std::map<int, size_t> limits;
};
SharedCache& shared_cache() {
  static SharedCache cache;
  return cache;
}

#if defined(SRKIT_CUDA_EMU)
// sm_90's cudaDevAttrMaxSharedMemoryPerBlockOptin.
constexpr size_t kEmulatedOptInLimit = 227 * 1024;
int current_device() { return 0; }
size_t query_opt_in_limit(int) { return kEmulatedOptInLimit; }
void set_opt_in(const void*, size_t bytes, const char* name) {
  if (bytes > kEmulatedOptInLimit) check_launch(cudaErrorInvalidValue, name);
}
#else
int current_device() {
  int device = 0;
  check_launch(cudaGetDevice(&device), "opt_in_shared");
  return device;
}
size_t query_opt_in_limit(int device) {
  int bytes = 0;
  check_launch(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
               "opt_in_shared_limit");
  return size_t(bytes);
}
void set_opt_in(const void* kernel, size_t bytes, const char* name) {
  check_launch(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)), name);
}
#endif
}  // namespace

size_t opt_in_shared_limit() {
  const int device = current_device();
  SharedCache& c = shared_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  const auto it = c.limits.find(device);
  if (it != c.limits.end()) return it->second;
  const size_t bytes = query_opt_in_limit(device);
  c.limits.emplace(device, bytes);
  return bytes;
}

void opt_in_shared_bytes(const void* kernel, size_t bytes, const char* name) {
  const std::pair<int, const void*> key(current_device(), kernel);
  SharedCache& c = shared_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  const auto it = c.opt_ins.find(key);
  if (it != c.opt_ins.end() && it->second >= bytes) return;  // already allowed
  set_opt_in(kernel, bytes, name);
  c.opt_ins[key] = bytes;
}

#if defined(SRKIT_CUDA_EMU)
int emulated_launch_status(const void* kernel, dim3 grid, dim3 block, size_t shared_bytes) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  const bool block_ok =
      threads >= 1 && threads <= 1024 && block.x <= 1024 && block.y <= 1024 && block.z <= 64;
  const bool grid_ok = grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= 0x7fffffffu &&
                       grid.y <= 65535 && grid.z <= 65535;
  size_t allowed = kDefaultSharedBytes;
  {
    SharedCache& c = shared_cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    const auto it = c.opt_ins.find({current_device(), kernel});
    if (it != c.opt_ins.end()) allowed = std::max(allowed, it->second);
  }
  const bool shared_ok = shared_bytes <= allowed;
  return block_ok && grid_ok && shared_ok ? cudaSuccess : cudaErrorInvalidConfiguration;
}
#endif

}  // namespace srkit::cuda
