// The CPU GEMM: OpenBLAS sgemm behind a small row-major interface, plus the
// widening that lets bf16 operands use it (this CPU has no bf16 GEMM worth
// calling: Debian's OpenBLAS does not export cblas_sbgemm).
#pragma once

#include <cstddef>

#include "kernels/common/bf16.h"

namespace srkit::cpu {

// Row-major C[M,N] = op(A)[M,K] @ op(B)[K,N] + beta * C, op = transpose when
// trans_* is set (A is then stored [K,M], B [N,K]). beta = 0 ignores C's contents.
// Call it outside OpenMP parallel regions: OpenBLAS runs its own thread pool.
void sgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B,
           int ldb, float beta, float* C, int ldc);

// dst[i] = src[i] for i < n, exactly. An orphaned worksharing loop without a
// barrier: inside a parallel region the team shares it (so several arrays are
// widened in one region), outside one it runs on the calling thread.
void widen_for(const bf16* src, float* dst, size_t n);

}  // namespace srkit::cpu
