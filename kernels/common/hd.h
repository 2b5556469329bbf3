// Host/device annotations so one function body serves the CPU loop and the CUDA kernel.
#pragma once

// On the host they are always inlined too: the CPU's SIMD loops (AdamW, casts)
// vectorize only with every element function inlined, and GCC's unit-growth
// limits would otherwise decide per translation unit, by its size, which loops
// stay scalar (adding optimizer instantiations once left AdamW's telemetry loops
// scalar: slower, and summing in another order).
#if defined(__CUDACC__)
#define SRKIT_HD __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define SRKIT_HD inline __attribute__((always_inline))
#else
#define SRKIT_HD inline
#endif
