// The CPU GEMM. srkit owns the parallel split: a product's output is cut into
// tiles whose geometry depends only on the shape (gemm_tiles), the tiles run on
// OpenMP threads, and each tile is one single-threaded BLAS call holding every
// element's whole reduction. A tile computes the same bits whichever thread
// runs it, so results do not depend on the thread count. (OpenBLAS's own
// threading does not promise that: it splits the output per thread count, and
// its edge micro-kernels accumulate in another order than the main one.)
//
// bf16 operands: Debian's OpenBLAS exports no bf16 GEMM (cblas_sbgemm), so
// each thread either widens the operand panels its tile needs into fp32 for
// sgemm or, on CPUs with AVX512_BF16, packs them in pairs for VDPBF16PS
// (kernels/cpu/gemm_bf16_path.h chooses; the paths sum in different orders),
// and adds the bias or the old value and rounds the tile while it is in
// cache. Scratch is O(threads x tile panels), not O(operands).
#pragma once

#include <cstddef>

#include "kernels/common/bf16.h"
#include "kernels/cpu/workspace.h"

namespace srkit::cpu {

// Row-major C[M,N] = op(A)[M,K] @ op(B)[K,N] + beta * C through OpenBLAS with
// as many threads as OpenBLAS is set to: not thread-count invariant. For
// measuring the machine's sgemm peak and as the ceiling in benchmarks; srkit's
// ops go through gemm_tiled.
void sgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B,
           int ldb, float beta, float* C, int ldc);

// Output tile of a product C[M,N] with reduction length K: `rows` x `cols`
// (the last tile of a row or column may be partial). A function of (M, N, K)
// and of whether the operands are widened into per-thread panels (bf16) only:
// never of the thread count.
struct GemmTiles {
  int rows, cols;
};
GemmTiles gemm_tiles(int M, int N, int K, bool widened_panels);

// One product for gemm_tiled, row-major: A is stored [M,K] (or [K,M] when
// trans_a), B [K,N] (or [N,K] when trans_b). With accumulate, C = RN(C + A.B);
// otherwise C = RN(A.B + bias) with bias[N] per column (nullable), and C's
// old contents are ignored. RN is the identity for fp32, where accumulate is
// BLAS's beta = 1 and the bias is added to the finished tile. A bf16 product
// may instead write an fp32 output, c_f32 (c null): the same sums, not rounded
// (fp32 weight gradients of bf16 activations).
template <typename T>
struct GemmProduct {
  int M, N, K;
  const T* a;
  int lda;
  bool trans_a;
  const T* b;
  int ldb;
  bool trans_b;
  T* c;
  int ldc;
  const T* bias;
  bool accumulate;
  float* c_f32 = nullptr;  // bf16 products only; then c is null
};

// Floats of workspace gemm_tiled holds for these products with `threads`
// OpenMP threads: per thread, the widened A and B panels and the fp32 tile of
// the largest product, each 64-byte aligned. 0 for fp32 (no widening).
template <typename T>
size_t gemm_scratch_floats(const GemmProduct<T>* products, int count, int threads);

// Every tile of every product, on the OpenMP threads (one region), each tile
// one BLAS call on one BLAS thread; the workspace (slot 0) holds
// gemm_scratch_floats(products, count, omp_get_max_threads()). bias must be
// null when accumulating. Call outside OpenMP parallel regions (throws
// std::logic_error inside one).
template <typename T>
void gemm_tiled(const GemmProduct<T>* products, int count, Workspace& ws);

}  // namespace srkit::cpu
