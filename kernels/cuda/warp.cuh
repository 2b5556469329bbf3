// Warp and block primitives with 32-lane warp semantics in both builds: the
// project's kernels call these, never __shfl*_sync or warpSize directly.
//
// Rules for warp code (they make it correct on a GPU and in the CPU emulation):
//   - 1-D blocks whose size is a multiple of 32: lane = threadIdx.x % 32,
//     warp = threadIdx.x / 32.
//   - Full-mask only: every thread of the block reaches every warp call the
//     same number of times; never inside a branch that threads of a warp take
//     differently, never after some threads returned. (In the emulation a
//     shuffle is a barrier of the whole block: a divergent one gives wrong
//     values or hangs.)
//   - Shuffles move arithmetic types of at most 8 bytes; shuffle structs field
//     by field.
//   - Block reductions (block_sum, block_max) contain __syncthreads: call them
//     from every thread of the block, as a __syncthreads.
//
// Why the emulation needs its own bodies: the HIP CPU runtime has 64-lane warps,
// and its shuffles with width < 64 return the caller's own value on the upper
// 32 lanes. Shuffling at width 64 with the absolute source lane is correct, so a
// 32-lane warp w of a 64-lane group reads lane (threadIdx.x % 64 / 32 * 32 + src).
// The emulation also checks the block shape on every call (abort with a message).
#pragma once

#include <cstdint>

#include "kernels/cuda/compat.cuh"

#if defined(SRKIT_CUDA_EMU)
#include <cstdio>
#include <cstdlib>
#endif

namespace srkit::cuda {

inline constexpr int kWarpSize = 32;

#if defined(SRKIT_CUDA_EMU)
// Aborts unless the block is 1-D with whole warps (the rules above).
__device__ inline void check_warp_block() {
  if (blockDim.y != 1u || blockDim.z != 1u || blockDim.x % 32u != 0u) {
    std::fprintf(stderr,
                 "srkit warp.cuh: warp code needs a 1-D block of whole warps, got %ux%ux%u\n",
                 unsigned(blockDim.x), unsigned(blockDim.y), unsigned(blockDim.z));
    std::abort();
  }
}
#endif

__device__ __forceinline__ int lane_id() {
#if defined(SRKIT_CUDA_EMU)
  check_warp_block();
#endif
  return int(threadIdx.x & 31u);
}

__device__ __forceinline__ int warp_id() { return int(threadIdx.x >> 5); }

// The value `v` of lane `src_lane` of the caller's warp; as in CUDA, a lane
// outside 0..31 means that lane modulo 32.
template <typename T>
__device__ __forceinline__ T warp_shfl(T v, int src_lane) {
#if defined(SRKIT_CUDA_EMU)
  check_warp_block();
  const int base = int(threadIdx.x % 64u / 32u * 32u);
  return __shfl(v, base + (src_lane & 31), 64);
#else
  return __shfl_sync(0xffffffffu, v, src_lane);
#endif
}

// The value `v` of lane (lane_id() ^ lane_mask); lane_mask in 1..31.
template <typename T>
__device__ __forceinline__ T warp_shfl_xor(T v, int lane_mask) {
#if defined(SRKIT_CUDA_EMU)
  check_warp_block();
  if (lane_mask < 1 || lane_mask > 31) {
    std::fprintf(stderr, "srkit warp.cuh: warp_shfl_xor lane mask %d outside 1..31\n", lane_mask);
    std::abort();
  }
  return __shfl_xor(v, lane_mask, 64);  // lane ^ mask stays in the caller's 32 lanes
#else
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
#endif
}

struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {  // with a NaN among the inputs the result is unspecified
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a < b ? b : a;
  }
};

// Butterfly reduction: every lane gets the result, and the same bits (each step
// combines the same two partial values on both lanes of a pair; op commutes).
template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
  for (int m = 16; m > 0; m >>= 1) v = op(v, warp_shfl_xor(v, m));
  return v;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  return warp_reduce(v, SumOp{});
}

template <typename T>
__device__ __forceinline__ T warp_max(T v) {
  return warp_reduce(v, MaxOp{});
}

// Each warp reduces its lanes, lane 0 stores the warp's value, then every warp
// reduces the (up to 32) warp values, lanes past the last warp contributing
// `identity`: all threads get the same bits, in a fixed order. Contains
// __syncthreads: every thread of the block calls it.
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, T identity, Op op) {
  __shared__ T partial[kWarpSize];
  const int lane = lane_id(), warp = warp_id();
  const int warps = int((blockDim.x + 31u) / 32u);
  v = warp_reduce(v, op);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = warp_reduce(lane < warps ? partial[lane] : identity, op);
  __syncthreads();  // partial is reused by the next call
  return v;
}

// Sum over the block; every thread gets the result.
template <typename T>
__device__ __forceinline__ T block_sum(T v) {
  return block_reduce(v, T(0), SumOp{});
}

// Maximum over the block; every thread gets the result. `lowest` is the
// identity (e.g. -INFINITY for floats).
template <typename T>
__device__ __forceinline__ T block_max(T v, T lowest) {
  return block_reduce(v, lowest, MaxOp{});
}

}  // namespace srkit::cuda
