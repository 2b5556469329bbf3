// The device scratch of the CUDA ops, as plain arithmetic (header-only): the
// kernels size their partitions with these functions and the memory model
// (lib/train/memory_model.cpp, --device cuda) adds the same bytes, so it can
// be exact without the CUDA backend being built.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace srkit::cuda {

// cuBLASLt's workspace, allocated once by Gemm (kernels/cuda/gemm.cu).
inline constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;

// The final sum of chunk_sums.cuh (LayerNorm's parameter gradients and
// column_sums): a block takes kChunkSumColumns columns and adds each one's
// chunk sums in kChunkSumSegments segments of consecutive chunks, then the
// segments in order. Part of the order of those sums, hence of their bits.
inline constexpr int kChunkSumColumns = 32;
inline constexpr int kChunkSumSegments = 8;

// column_sums' fixed partition (kernels/cuda/column_sums.cu, the bias
// gradient): the rows cut into chunks of rows_per_chunk consecutive rows, each
// chunk's column sums one row of fp32 partials. The height aims at about
// kColumnSumsTargetTiles (chunk, 256-column) tiles, so that the SMs stay busy
// when N = B*T is large and OC small; it is a multiple of kColumnSumsMinRows
// rows, and there are few enough chunks for gridDim.y <= 65535. The partition
// fixes the order of every sum, hence the bits.
inline constexpr int kColumnSumsTileColumns = 256;
inline constexpr int64_t kColumnSumsTargetTiles = 1024;
inline constexpr int kColumnSumsMinRows = 32;
struct ColumnSumsPartition {
  int rows_per_chunk = 1, chunks = 1;
};
inline ColumnSumsPartition column_sums_partition(int N, int OC) {
  const int64_t tiles_per_row = (int64_t(OC) + kColumnSumsTileColumns - 1) / kColumnSumsTileColumns;
  int64_t rows = (int64_t(N) * tiles_per_row + kColumnSumsTargetTiles - 1) / kColumnSumsTargetTiles;
  rows = std::max<int64_t>(rows, (int64_t(N) + 65534) / 65535);
  rows = std::max<int64_t>(kColumnSumsMinRows, (rows + kColumnSumsMinRows - 1) /
                                                   kColumnSumsMinRows * kColumnSumsMinRows);
  ColumnSumsPartition p;
  p.rows_per_chunk = int(std::min<int64_t>(rows, N));
  p.chunks = int((int64_t(N) + p.rows_per_chunk - 1) / p.rows_per_chunk);
  return p;
}
// The fp32 chunk sums of column_sums over an [N, OC] matrix.
inline size_t column_sums_scratch_bytes(int N, int OC) {
  return size_t(column_sums_partition(N, OC).chunks) * size_t(OC) * sizeof(float);
}

// LayerNorm's parameter gradients: the N rows cut into at most kLayernormChunks
// fixed chunks of consecutive rows, each chunk's sums of dweight and dbias.
// 256: the fused backward runs one 8-warp block a chunk, and 256 blocks of
// 32 rows (B=8, T=1024) fill 132 SMs at two blocks each; the scratch stays
// small (256 * 2C floats, 1.5 MiB at C = 768).
inline constexpr int kLayernormChunks = 256;
struct LayernormPartition {
  int rows_per_chunk, chunks;
};
inline LayernormPartition layernorm_partition(int N) {
  const int per = (N + kLayernormChunks - 1) / kLayernormChunks;
  return {per, (N + per - 1) / per};
}
inline size_t layernorm_backward_scratch_bytes(int N, int C) {
  if (N <= 0 || C <= 0) return 0;
  return size_t(layernorm_partition(N).chunks) * 2 * size_t(C) * sizeof(float);
}

// sum_squares: fp64 sums of fixed chunks of kSumSquaresChunk elements.
inline constexpr size_t kSumSquaresChunk = 32768;
inline size_t sum_squares_chunks(size_t n) { return (n + kSumSquaresChunk - 1) / kSumSquaresChunk; }
inline size_t sum_squares_scratch_bytes(size_t n) { return sum_squares_chunks(n) * sizeof(double); }

// The embedding backward's plan for N positions: order, group starts (G + 1 <=
// N + 1) and group tokens, at offsets fixed by N.
inline size_t encoder_plan_bytes(int N) { return (3 * size_t(N) + 1) * sizeof(int32_t); }

}  // namespace srkit::cuda
