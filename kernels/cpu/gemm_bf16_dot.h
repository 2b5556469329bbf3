// The bf16 GEMM tile on CPUs with AVX512_BF16 (VDPBF16PS): bf16 operands
// multiplied as they are, without widening them to fp32 first. gemm_tiled's
// bf16 path (kernels/cpu/gemm_tiles.h) packs a tile's operand panels with pack_a /
// pack_b and calls tile_product instead of widening them for sgemm; the
// rounding of the finished fp32 tile is the same on both paths.
//
// Numerics (docs/architecture.md, "The bf16 GEMM on AVX512_BF16"): the product of two
// bf16 values is exact in fp32. Each output element is one chain over k in
// pairs, c = RN(RN(c + a[k+1] b[k+1]) + a[k] b[k]) for k = 0, 2, 4, ...
// (the order Intel's SDM gives VDPBF16PS), starting from c = 0, with subnormal
// inputs, products and sums flushed to zero. dot_pair_reference is that rule for
// one step, the known answer the tests hold the kernel to. The chain does not
// depend on the tile geometry or on the thread count; it differs from the
// sgemm path, whose sums run in OpenBLAS's blocked order with fused
// multiply-adds, by a few fp32 ulps of the sum before the final bf16 rounding.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/bf16.h"

namespace srkit::cpu::bf16_dot {

// The CPU executes VDPBF16PS (AVX512_BF16 with AVX512F).
bool cpu_supported();

// Packed panels hold pairs of bf16 along k as 32-bit words (k even in the low
// half; a missing k + 1 past an odd K is +0). For rows x K of A:
// rows * ceil(K / 2) words; for K x cols of B: cols * ceil(K / 2) words.
size_t packed_words(int rows_or_cols, int K);

// Rows [0, rows) of op(A) (A stored [M,K], or [K,M] when trans), reduction K.
// Both packers use AVX-512 (BW, VL): they require cpu_supported().
void pack_a(const bf16* a, size_t lda, bool trans, int rows, int K, uint32_t* dst);

// Columns [0, cols) of op(B) (B stored [K,N], or [N,K] when trans).
void pack_b(const bf16* b, size_t ldb, bool trans, int cols, int K, uint32_t* dst);

// acc[r * ldacc + c] = sum over k of A[r,k] B[k,c] by the chain above, for the
// packed panels of rows x K and K x cols. Requires cpu_supported().
void tile_product(const uint32_t* packed_a, const uint32_t* packed_b, int rows, int cols, int K,
                  float* acc, size_t ldacc);

// One step of the chain, in plain C++: c after the pair (a0, a1) x (b0, b1).
float dot_pair_reference(float c, bf16 a0, bf16 a1, bf16 b0, bf16 b1);

}  // namespace srkit::cpu::bf16_dot
