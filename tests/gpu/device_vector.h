// A typed array in device memory for the kernel-level tests (GPU or the CPU
// emulation): allocated (and filled from a host vector) on construction, read
// back with host(), freed on destruction.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/cuda/device.h"

namespace srkit::test {

template <typename T>
struct DeviceVector {
  explicit DeviceVector(size_t n) : n(n), p(static_cast<T*>(cuda::device_malloc(n * sizeof(T)))) {}
  explicit DeviceVector(const std::vector<T>& h) : DeviceVector(h.size()) {
    cuda::copy_to_device(p, h.data(), n * sizeof(T));
  }
  ~DeviceVector() { cuda::device_free(p); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  std::vector<T> host() const {
    std::vector<T> h(n);
    cuda::copy_to_host(h.data(), p, n * sizeof(T));
    return h;
  }
  size_t n;
  T* p;
};

}  // namespace srkit::test
