// CUDA device discovery, errors, memory and streams, callable from plain C++
// (no CUDA headers leak into callers).
#pragma once

#include <cstddef>
#include <string>

#include "kernels/cuda/stream.h"

namespace srkit::cuda {

// True when at least one usable CUDA device is present. Any runtime error (no
// driver: cudaGetDeviceCount returns "insufficient driver", not zero) counts as
// "no device"; *reason then says why. The CPU emulation is a device.
bool device_available(std::string* reason = nullptr);

// True in the CPU emulation build (SRKIT_CUDA_EMU): kernels run on CPU threads.
constexpr bool emulated() {
#if defined(SRKIT_CUDA_EMU)
  return true;
#else
  return false;
#endif
}

// "NVIDIA H200 (sm_90, 139 GiB)" for the current device; in the emulation
// "emulated on CPU (HIP-CPU, N threads)".
std::string device_description();

// Throws std::runtime_error naming the failed call when code != 0 (cudaSuccess).
void check(int code, const char* what);

void* device_malloc(size_t bytes);
void device_free(void* p);
// Synchronous copies (they wait for all earlier work on the device).
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);
void synchronize();

// A new stream, ordered independently of the default stream's work.
Stream stream_create();
void stream_destroy(Stream stream);
void stream_synchronize(Stream stream);

}  // namespace srkit::cuda
