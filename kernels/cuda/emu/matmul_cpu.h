// The arithmetic of the emulated cublasLtMatmul (kernels/cuda/emu/include/cublasLt.h
// states the definition and the order of operations), on host memory, with no
// validation: cublaslt.cpp checks a call before it queues one of these.
#pragma once

#include <cstdint>

namespace srkit::cuda::emu {

enum class ElemType { kF32, kBF16 };

struct MatrixRef {
  const void* data;
  ElemType type;
  int64_t ld;            // column-major leading dimension, in elements
  int64_t batch_stride;  // elements between consecutive matrices of a batch
};

struct MatmulProblem {
  int64_t m, n, k, batch;
  bool trans_a, trans_b;
  MatrixRef a, b, c;  // c.data is read only when beta != 0
  void* d;
  ElemType d_type;
  int64_t ldd, d_batch_stride;
  float alpha, beta;
  const void* bias;  // nullptr: no bias; else m elements, the same for every batch
  ElemType bias_type;
  bool gelu;
  void* aux;  // nullptr: none; else the GELU input, m x n (batch 1) with aux_ld
  ElemType aux_type;
  int64_t aux_ld;
};

void matmul_cpu(const MatmulProblem& p);

}  // namespace srkit::cuda::emu
