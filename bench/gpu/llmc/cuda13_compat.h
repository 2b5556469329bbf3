// Forced into llm.c's one translation unit (nvcc -include) by build_llmc.sh, so
// that its source builds unmodified with CUDA 13: CUDA 13 replaced the device
// number argument of cudaMemAdvise with a cudaMemLocation, and llm.c (commit
// f1e2ace) still passes cudaCpuDeviceId. This overload takes the old form and
// calls the new one with the same meaning (the CPU as the preferred location).
// srkit's own code never includes this file.
#pragma once
#include <cuda_runtime.h>

#if CUDART_VERSION >= 13000
inline cudaError_t cudaMemAdvise(const void* ptr, size_t count, cudaMemoryAdvise advice,
                                 int device) {
  cudaMemLocation where{};
  where.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
  where.id = device == cudaCpuDeviceId ? 0 : device;
  return cudaMemAdvise(ptr, count, advice, where);
}
#endif
