#include "kernels/cpu/gemm.h"

#include <cblas.h>

#include "kernels/cpu/cast.h"

namespace srkit::cpu {

void sgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B,
           int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

const float* as_f32(const bf16* x, size_t n, Workspace& ws, int slot) {
  float* out = ws.floats(slot, n);
  cast_bf16_to_f32(x, out, n);
  return out;
}

}  // namespace srkit::cpu
