#include "kernels/cpu/gemm.h"

#include <cblas.h>

namespace srkit::cpu {

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B,
           int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

void widen_for(const bf16* src, float* dst, size_t n) {
#pragma omp for simd schedule(static) nowait
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
}

}  // namespace srkit::cpu
