// Host/device annotations so one function body serves the CPU loop and the CUDA kernel.
#pragma once

#if defined(__CUDACC__)
#define SRKIT_HD __host__ __device__ __forceinline__
#else
#define SRKIT_HD inline
#endif
