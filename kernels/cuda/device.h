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

// Asynchronous copies and fills queued on `stream`. A host source of
// copy_to_device_async is read when the stream reaches the copy unless it is
// pinned memory being staged (callers keep it unchanged until an event after
// the copy has completed); the host destination of copy_to_host_async is
// valid after a synchronise.
void copy_to_device_async(void* dst, const void* host_src, size_t bytes, Stream stream);
void copy_to_host_async(void* host_dst, const void* src, size_t bytes, Stream stream);
void copy_device_async(void* dst, const void* src, size_t bytes, Stream stream);
void fill_zero_async(void* dst, size_t bytes, Stream stream);

// Page-locked host memory (plain memory in the emulation), for staging copies.
void* host_alloc_pinned(size_t bytes);
void host_free_pinned(void* p);

// Events, as an opaque handle.
using Event = void*;
Event event_create();
void event_destroy(Event event);
void event_record(Event event, Stream stream);
void event_synchronize(Event event);

// Free and total device memory in bytes.
void memory_info(size_t* free_bytes, size_t* total_bytes);

}  // namespace srkit::cuda
