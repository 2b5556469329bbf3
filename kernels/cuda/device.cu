#include <stdexcept>
#include <string>
#include <thread>

#include "kernels/cuda/compat.cuh"
#include "kernels/cuda/device.h"

namespace srkit::cuda {

bool device_available(std::string* reason) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (reason) *reason = std::string("no usable CUDA device: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error
    return false;
  }
  if (count == 0) {
    if (reason) *reason = "no CUDA device present";
    return false;
  }
  return true;
}

std::string device_description() {
  if constexpr (emulated()) {
    return "emulated on CPU (HIP-CPU, " + std::to_string(std::thread::hardware_concurrency()) +
           " threads)";
  }
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  // Driver and runtime versions, as CUDA encodes them (1000 * major + 10 * minor).
  int driver = 0, runtime = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  auto version = [](int v) {
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  };
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ", " + std::to_string(prop.totalGlobalMem >> 30) +
         " GiB, driver " + version(driver) + ", CUDA runtime " + version(runtime) + ")";
}

void check(int code, const char* what) {
  if (code != cudaSuccess) {
    throw std::runtime_error(std::string(what) +
                             " failed: " + cudaGetErrorString(static_cast<cudaError_t>(code)));
  }
}

void* device_malloc(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}

void device_free(void* p) { check(cudaFree(p), "cudaFree"); }

void copy_to_device(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}

void synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

Stream stream_create() {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return s;
}

void stream_destroy(Stream stream) { check(cudaStreamDestroy(stream), "cudaStreamDestroy"); }

void stream_synchronize(Stream stream) {
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

void copy_to_device_async(void* dst, const void* host_src, size_t bytes, Stream stream) {
  check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync H2D");
}

void copy_to_host_async(void* host_dst, const void* src, size_t bytes, Stream stream) {
  check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync D2H");
}

void copy_device_async(void* dst, const void* src, size_t bytes, Stream stream) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync D2D");
}

void fill_zero_async(void* dst, size_t bytes, Stream stream) {
  check(cudaMemsetAsync(dst, 0, bytes, stream), "cudaMemsetAsync");
}

void* host_alloc_pinned(size_t bytes) {
  void* p = nullptr;
  check(cudaMallocHost(&p, bytes), "cudaMallocHost");
  return p;
}

void host_free_pinned(void* p) { check(cudaFreeHost(p), "cudaFreeHost"); }

Event event_create() {
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  return static_cast<Event>(e);
}

void event_destroy(Event event) {
  check(cudaEventDestroy(static_cast<cudaEvent_t>(event)), "cudaEventDestroy");
}

void event_record(Event event, Stream stream) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(event), stream), "cudaEventRecord");
}

void event_synchronize(Event event) {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
}

void memory_info(size_t* free_bytes, size_t* total_bytes) {
  check(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
}

}  // namespace srkit::cuda
