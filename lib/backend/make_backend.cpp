#include "lib/backend/make_backend.h"

#include <stdexcept>

namespace srkit {

std::unique_ptr<Backend> make_backend(DeviceKind device, int threads) {
  if (device == DeviceKind::kCpu) return make_cpu_backend(threads);
#if defined(SRKIT_HAVE_CUDA)
  (void)threads;  // the device's threads are its own (and the emulation's TBB pool)
  return make_cuda_backend();
#else
  throw std::invalid_argument(
      "--device cuda: this build has no CUDA backend (configure with nvcc present, or "
      "-DSRKIT_CUDA_EMU=ON for the CPU emulation)");
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& device, int threads) {
  return make_backend(parse_device_kind(device), threads);
}

}  // namespace srkit
