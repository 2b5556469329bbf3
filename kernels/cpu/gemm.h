// The CPU GEMM: OpenBLAS sgemm behind a small row-major interface, plus the fp32
// views that let bf16 operands use it (this CPU has no bf16 GEMM worth calling:
// Debian's OpenBLAS does not export cblas_sbgemm). Call these outside OpenMP
// parallel regions: OpenBLAS runs its own thread pool.
#pragma once

#include <cstddef>

#include "kernels/common/bf16.h"
#include "kernels/cpu/workspace.h"

namespace srkit::cpu {

// Row-major C[M,N] = op(A)[M,K] @ op(B)[K,N] + beta * C, op = transpose when
// trans_* is set (A is then stored [K,M], B [N,K]). beta = 0 ignores C's contents.
void sgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B,
           int ldb, float beta, float* C, int ldc);

// An fp32 view of x[0..n): fp32 arrays as they are, bf16 ones widened (exactly,
// in parallel) into workspace slot `slot`.
inline const float* as_f32(const float* x, size_t, Workspace&, int) { return x; }
const float* as_f32(const bf16* x, size_t n, Workspace& ws, int slot);

}  // namespace srkit::cpu
