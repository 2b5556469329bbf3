// The last pass of the deterministic two-pass column sums (LayerNorm's
// parameter gradients, kernels/cuda/layernorm.cu; the bias gradient,
// kernels/cuda/column_sums.cu): a [chunks, width] matrix of fp32 partial sums,
// one row per fixed chunk of input rows, added over its rows into one total a
// column, in an order fixed by `chunks` alone.
//
// A block of kChunkSumThreads threads takes kChunkSumColumns consecutive
// columns. Its 8 warps each add one of 8 consecutive segments of the chunks in
// chunk order (a warp reads 32 consecutive columns of a chunk: coalesced), then
// warp 0 adds the 8 segment sums in segment order. That is 8 times the loads in
// flight of one thread a column, which summed 256 chunks one after another,
// each a dependent load from L2.
#pragma once

#include "kernels/cuda/compat.cuh"
#include "kernels/cuda/scratch_sizes.h"

namespace srkit::cuda {

inline constexpr int kChunkSumThreads = kChunkSumColumns * kChunkSumSegments;

// Blocks of a launch over `width` columns.
inline unsigned chunk_sum_blocks(int width) {
  return unsigned((width + kChunkSumColumns - 1) / kChunkSumColumns);
}

// Block blockIdx.x sums columns [32 blockIdx.x, 32 blockIdx.x + 32) of
// partial (row stride `width`) and calls store(j, total) once per column j <
// width, from warp 0. Every thread of the block calls it (it has a barrier).
template <typename Store>
__device__ __forceinline__ void sum_chunk_columns(const float* partial, int chunks, int width,
                                                  Store store) {
  __shared__ float segment_sums[kChunkSumSegments][kChunkSumColumns];
  const int column = int(threadIdx.x) % kChunkSumColumns;
  const int segment = int(threadIdx.x) / kChunkSumColumns;
  const int j = int(blockIdx.x) * kChunkSumColumns + column;
  const int per = (chunks + kChunkSumSegments - 1) / kChunkSumSegments;
  const int k0 = segment * per;
  const int k1 = chunks - k0 < per ? chunks : k0 + per;
  float sum = 0.0f;
  if (j < width) {
    for (int k = k0; k < k1; ++k) sum += partial[size_t(k) * size_t(width) + size_t(j)];
  }
  segment_sums[segment][column] = sum;
  __syncthreads();
  if (segment != 0 || j >= width) return;  // past the barrier: nothing else waits
  float total = segment_sums[0][column];
  for (int q = 1; q < kChunkSumSegments; ++q) total += segment_sums[q][column];
  store(j, total);
}

}  // namespace srkit::cuda
