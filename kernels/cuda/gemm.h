// GEMMs on a CUDA device through cuBLASLt (kernels/cuda/gemm.cu): bf16 or fp32
// operands, fp32 compute and accumulation (CUBLAS_COMPUTE_32F: no TF32, fp32
// means fp32), one rounding of each output element to its dtype, the bias added
// to the fp32 sum by the epilogue. Matrix layouts, descriptors and the chosen
// algorithm are cached per shape; the cuBLASLt workspace is allocated once.
// Callable from plain C++: no CUDA or cuBLAS header leaks out.
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/common/dtype.h"
#include "kernels/common/grad_write.h"
#include "kernels/cuda/stream.h"

namespace srkit::cuda {

class Gemm {
 public:
  // Every GEMM of this object is queued on `stream`.
  explicit Gemm(Stream stream);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Device bytes held outside any op's arguments (the cuBLASLt workspace).
  size_t workspace_bytes() const;

  // The row-major conventions of kernels/cpu/elements.h: out[N,OC] = inp[N,C] @
  // weight[OC,C]^T (+ bias[OC], may be null).
  void matmul_forward(DType dt, void* out, const void* inp, const void* weight, const void* bias,
                      int N, int C, int OC);
  // Device scratch matmul_backward needs (dbias partial sums, reduced in a
  // fixed order: deterministic).
  size_t matmul_backward_scratch_bytes(int N, int OC) const;
  // dinp[N,C] (+)= dout @ weight; dweight[OC,C] (+)= dout^T @ inp; dbias[OC]
  // (+)= sum over rows of dout (dbias may be null). Accumulating into a bf16
  // output rounds once: RN(old + product), as the CPU. dweight and dbias are
  // stored as grad_dt (dt, or f32 with bf16 dt: not rounded).
  void matmul_backward(DType dt, DType grad_dt, void* dinp, GradWrite dinp_mode, void* dweight,
                       void* dbias, GradWrite param_mode, const void* dout, const void* inp,
                       const void* weight, int N, int C, int OC, void* scratch);

  // Strided-batched row-major product for attention: for b < batch,
  //   D_b[M,N] = alpha * op(A_b) @ op(B_b) + beta * D_b
  // with op(X) = X or X^T (trans_*), A_b stored [M,K] ([K,M] transposed) with
  // row stride lda, B_b stored [K,N] ([N,K] transposed) with row stride ldb, D_b
  // with row stride ldd, consecutive batch items `stride_*` elements apart.
  // a_dt, b_dt: the operands' storage; d_dt: the output's.
  struct Batched {
    bool trans_a = false, trans_b = false;
    int M = 0, N = 0, K = 0, batch = 1;
    long long lda = 0, ldb = 0, ldd = 0;
    long long stride_a = 0, stride_b = 0, stride_d = 0;
    float alpha = 1.0f, beta = 0.0f;
  };
  void batched(const Batched& shape, DType ab_dt, const void* A, const void* B, DType d_dt,
               void* D);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace srkit::cuda
