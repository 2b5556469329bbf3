// CUDA device discovery and error handling, callable from plain C++ (no CUDA
// headers leak into callers).
#pragma once

#include <string>

namespace srkit::cuda {

// True when at least one usable CUDA device is present. Any runtime error (no
// driver: cudaGetDeviceCount returns "insufficient driver", not zero) counts as
// "no device"; *reason then says why.
bool device_available(std::string* reason = nullptr);

// "NVIDIA H200 (sm_90, 139 GiB)" for the current device.
std::string device_description();

// Throws std::runtime_error naming the failed call when code != 0 (cudaSuccess).
void check(int code, const char* what);

void* device_malloc(size_t bytes);
void device_free(void* p);
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);
void synchronize();

}  // namespace srkit::cuda
