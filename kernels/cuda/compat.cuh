// The one CUDA runtime header of the project: every CUDA source (kernels, the
// NCCL communicator, CUDA tests and benchmarks) includes this instead of
// <cuda_runtime.h>.
//
// Real build: the CUDA runtime, unchanged.
// Emulation build (SRKIT_CUDA_EMU, docs/cuda-emulation.md): the HIP CPU runtime
// (header-only, ../shared/third_party/HIP-CPU) runs kernels on CPU threads, and
// the CUDA runtime names the project uses are mapped onto HIP's here, in one
// place, so that no source is rewritten for the emulation. Kernels must also
// follow the rules that make them portable to the emulation:
//   - launch through srkit::cuda::launch (kernels/cuda/launch.cuh), never <<<>>>;
//   - declare dynamic shared memory with SRKIT_DYNAMIC_SHARED(type, name);
//   - use the warp helpers of kernels/cuda/warp.cuh, never __shfl*_sync or
//     warpSize (64 in HIP-CPU: the emulation makes it a compile error).
#pragma once

#include "kernels/cuda/stream.h"

#if !defined(SRKIT_CUDA_EMU)

#include <cuda_runtime.h>

#include <type_traits>

static_assert(std::is_same_v<srkit::cuda::Stream, cudaStream_t>,
              "srkit::cuda::Stream must be the native CUDA stream type");

// Aligned for any element type; one byte array for every kernel, since CUDA
// rejects `extern __shared__` arrays of different types under one name.
#define SRKIT_DYNAMIC_SHARED(type, name)                                \
  extern __shared__ __align__(16) unsigned char srkit_dynamic_shared[]; \
  type* name = reinterpret_cast<type*>(srkit_dynamic_shared)

#else  // SRKIT_CUDA_EMU

#include <hip/hip_runtime.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <type_traits>

static_assert(std::is_same_v<srkit::cuda::Stream, hipStream_t>,
              "srkit::cuda::Stream must be HIP-CPU's stream type (kernels/cuda/stream.h)");

// HIP-CPU gives kernels and device functions __attribute__((simd)) under g++,
// which then warns "unsupported argument type ... for simd" for every struct
// argument, a warning no -W option turns off. The SIMD clones buy the emulation
// nothing, so both lose the attribute, as HIP-CPU itself does under clang.
#undef __global__
#define __global__ __attribute__((flatten))
#undef __device__
#define __device__
// HIP-CPU's __forceinline__ drops `inline` without NDEBUG, which would turn
// header functions into multiple definitions in debug builds.
#undef __forceinline__
#define __forceinline__ __attribute__((always_inline)) inline

#define SRKIT_DYNAMIC_SHARED(type, name) HIP_DYNAMIC_SHARED(type, name)

// ---- types and constants -----------------------------------------------------
using cudaError_t = hipError_t;
using cudaStream_t = hipStream_t;
using cudaEvent_t = hipEvent_t;
using cudaDeviceProp = hipDeviceProp_t;
using cudaMemcpyKind = hipMemcpyKind;

inline constexpr cudaError_t cudaSuccess = hipSuccess;
inline constexpr cudaError_t cudaErrorNotReady = hipErrorNotReady;
inline constexpr cudaError_t cudaErrorInvalidValue = hipErrorInvalidValue;
inline constexpr cudaError_t cudaErrorInvalidConfiguration = hipErrorInvalidConfiguration;
inline constexpr cudaError_t cudaErrorMemoryAllocation = hipErrorOutOfMemory;
inline constexpr cudaMemcpyKind cudaMemcpyHostToHost = hipMemcpyHostToHost;
inline constexpr cudaMemcpyKind cudaMemcpyHostToDevice = hipMemcpyHostToDevice;
inline constexpr cudaMemcpyKind cudaMemcpyDeviceToHost = hipMemcpyDeviceToHost;
inline constexpr cudaMemcpyKind cudaMemcpyDeviceToDevice = hipMemcpyDeviceToDevice;
inline constexpr cudaMemcpyKind cudaMemcpyDefault = hipMemcpyDefault;
inline constexpr unsigned cudaStreamDefault = hipStreamDefault;
inline constexpr unsigned cudaStreamNonBlocking = hipStreamNonBlocking;
inline constexpr unsigned cudaEventDefault = hipEventDefault;
inline constexpr unsigned cudaEventDisableTiming = hipEventDisableTiming;
// HIP-CPU's null stream. Unlike CUDA's legacy default stream it does not wait
// for other streams: order work across streams with events.
inline const cudaStream_t cudaStreamLegacy = nullptr;

// ---- errors and devices ------------------------------------------------------
inline const char* cudaGetErrorString(cudaError_t e) { return hipGetErrorString(e); }
inline const char* cudaGetErrorName(cudaError_t e) { return hipGetErrorName(e); }
inline cudaError_t cudaGetLastError() { return hipGetLastError(); }
inline cudaError_t cudaPeekAtLastError() { return hipPeekAtLastError(); }
inline cudaError_t cudaGetDeviceCount(int* count) { return hipGetDeviceCount(count); }
inline cudaError_t cudaGetDevice(int* device) { return hipGetDevice(device); }
inline cudaError_t cudaSetDevice(int device) { return hipSetDevice(device); }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  return hipGetDeviceProperties(prop, device);
}
inline cudaError_t cudaDeviceSynchronize() { return hipDeviceSynchronize(); }
inline cudaError_t cudaDriverGetVersion(int* version) { return hipDriverGetVersion(version); }
inline cudaError_t cudaRuntimeGetVersion(int* version) { return hipRuntimeGetVersion(version); }
inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  return hipMemGetInfo(free_bytes, total_bytes);
}

// ---- memory ------------------------------------------------------------------
// cudaMalloc returns memory aligned to at least 256 bytes, and code relies on it
// (cuBLASLt's algorithms assume 256-byte aligned matrices unless told less);
// HIP-CPU's hipMalloc is std::malloc (16 bytes). Aligned storage is released by
// the std::free behind hipFree, as std::aligned_alloc allows.
inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (!p) return cudaErrorInvalidValue;
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  return *p || bytes == 0 ? cudaSuccess : cudaErrorMemoryAllocation;
}
template <typename T>
cudaError_t cudaMalloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
// hipMallocAsync queues the malloc on the stream and returns before *p is set;
// cudaMallocAsync sets it at once. Allocate now: the memory then exists before
// any later work on any stream, which is all stream ordering asks of it.
inline cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t) {
  return cudaMalloc(p, bytes);
}
template <typename T>
cudaError_t cudaMallocAsync(T** p, size_t bytes, cudaStream_t stream) {
  return cudaMallocAsync(reinterpret_cast<void**>(p), bytes, stream);
}
inline cudaError_t cudaFree(void* p) { return hipFree(p); }
// Pinned host memory is ordinary memory here; the calls exist so that staging
// code is the same in both builds.
inline cudaError_t cudaMallocHost(void** p, size_t bytes) { return hipHostMalloc(p, bytes); }
inline cudaError_t cudaFreeHost(void* p) { return hipHostFree(p); }
inline cudaError_t cudaFreeAsync(void* p, cudaStream_t stream) { return hipFreeAsync(p, stream); }
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return hipMemcpy(dst, src, bytes, kind);
}
// HIP-CPU reads the source when the stream reaches the copy. CUDA copies a
// pageable host source to a staging buffer before returning, so callers may
// reuse or free it at once (the decay runs of kernels/cuda/adamw.cu rely on
// that): the emulation stages host-to-device sources the same way. Copies to
// the host stay asynchronous (as into pinned memory on a GPU): a host read
// before a synchronise sees stale data, a bug worth seeing in emulation.
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                   cudaStream_t stream = nullptr) {
  if (kind != cudaMemcpyHostToDevice || bytes == 0 || !dst || !src) {
    return hipMemcpyAsync(dst, src, bytes, kind, stream);
  }
  void* staged = nullptr;
  if (const cudaError_t e = hipMalloc(&staged, bytes); e != hipSuccess) return e;
  std::memcpy(staged, src, bytes);
  if (const cudaError_t e = hipMemcpyAsync(dst, staged, bytes, kind, stream); e != hipSuccess) {
    hipFree(staged);
    return e;
  }
  return hipFreeAsync(staged, stream);
}
inline cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  return hipMemset(dst, value, bytes);
}
inline cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes,
                                   cudaStream_t stream = nullptr) {
  return hipMemsetAsync(dst, value, bytes, stream);
}

// ---- streams and events ------------------------------------------------------
inline cudaError_t cudaStreamCreate(cudaStream_t* stream) { return hipStreamCreate(stream); }
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  return hipStreamCreateWithFlags(stream, static_cast<hipStreamFlags>(flags));
}
// CUDA lets work queued on a stream or an event finish after it is destroyed;
// HIP-CPU drops a destroyed stream's queued work, and a recorded event that is
// deleted before the stream reaches it is written after its release. Both wait
// for that work first.
inline cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (const cudaError_t e = hipStreamSynchronize(stream); e != hipSuccess) return e;
  return hipStreamDestroy(stream);
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return hipStreamSynchronize(stream);
}
// HIP-CPU's hipStreamQuery reports a stream idle as soon as its worker has taken
// the queued work, while that work may still be running. Waiting for it instead
// keeps the answer true: the query never says cudaErrorNotReady, and a poller
// that moves on after cudaSuccess sees finished results.
inline cudaError_t cudaStreamQuery(cudaStream_t stream) { return hipStreamSynchronize(stream); }
inline cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0) {
  return hipStreamWaitEvent(stream, event, flags);
}
inline cudaError_t cudaEventCreate(cudaEvent_t* event) { return hipEventCreate(event); }
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  return hipEventCreateWithFlags(event, static_cast<hipEventFlags>(flags));
}
inline cudaError_t cudaEventDestroy(cudaEvent_t event) {
  hipEventSynchronize(event);  // fails harmlessly for an event never recorded
  return hipEventDestroy(event);
}
inline cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr) {
  return hipEventRecord(event, stream);
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t event) { return hipEventSynchronize(event); }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop) {
  return hipEventElapsedTime(ms, start, stop);
}

// HIP-CPU's warpSize is 64; the project's warps have 32 lanes (kernels/cuda/warp.cuh:
// srkit::cuda::kWarpSize). Any later use of warpSize fails to compile here.
#define warpSize srkit_emulation_has_64_lane_warps_use_srkit_cuda_kWarpSize

#endif  // SRKIT_CUDA_EMU

// Full unrolling of a loop of constant trip count, for loops whose arrays must
// stay in registers on a GPU (a long body, such as an approximate try with its
// exact fallback, can make nvcc keep the loop and move the arrays to local
// memory). The emulation ignores it: g++ has no such pragma.
#if defined(SRKIT_CUDA_EMU)
#define SRKIT_UNROLL
#else
#define SRKIT_UNROLL _Pragma("unroll")
#endif
