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

// The bias gradient's fixed grid: column blocks of kBiasThreads columns x row
// chunks whose height aims at about kBiasTargetBlocks blocks (so the SMs stay
// busy when N = B*T is large and OC small), a multiple of kBiasMinRows rows,
// and few enough chunks for gridDim.y <= 65535.
inline constexpr int kBiasThreads = 256;
inline constexpr int64_t kBiasTargetBlocks = 1024;
inline constexpr int kBiasMinRows = 32;
struct BiasGrid {
  int column_blocks = 1, rows_per_chunk = 1, chunks = 1;
};
inline BiasGrid bias_grid(int N, int OC) {
  BiasGrid g;
  g.column_blocks = (OC + kBiasThreads - 1) / kBiasThreads;
  int64_t rows = (int64_t(N) * g.column_blocks + kBiasTargetBlocks - 1) / kBiasTargetBlocks;
  rows = std::max<int64_t>(rows, (int64_t(N) + 65534) / 65535);
  rows = std::max<int64_t>(kBiasMinRows, (rows + kBiasMinRows - 1) / kBiasMinRows * kBiasMinRows);
  g.rows_per_chunk = int(std::min<int64_t>(rows, N));
  g.chunks = int((int64_t(N) + g.rows_per_chunk - 1) / g.rows_per_chunk);
  return g;
}
// The fp32 chunk sums of the bias gradient of an [N, OC] dout.
inline size_t matmul_dbias_scratch_bytes(int N, int OC) {
  return size_t(bias_grid(N, OC).chunks) * size_t(OC) * sizeof(float);
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
