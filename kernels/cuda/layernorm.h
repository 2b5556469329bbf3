// LayerNorm on a CUDA device (kernels/cuda/layernorm.cu), callable from plain
// C++. fp32 statistics per row (eps 1e-5), like the CPU op; reductions run in a
// fixed order of their own, so results are deterministic run to run and agree
// with the CPU to the conformance suite's stated tolerance.
#pragma once

#include <cstddef>

#include "kernels/common/dtype.h"
#include "kernels/common/grad_write.h"
#include "kernels/cuda/scratch_sizes.h"
#include "kernels/cuda/stream.h"

namespace srkit::cuda {

void layernorm_forward(DType dt, void* out, float* mean, float* rstd, const void* inp,
                       const void* weight, const void* bias, int N, int C, Stream stream);

// residual = a + b (rounded to dt) and ln = layernorm(residual): one pass, the
// same bits as residual_forward then layernorm_forward.
void residual_layernorm_forward(DType dt, void* residual, void* ln, float* mean, float* rstd,
                                const void* a, const void* b, const void* weight, const void* bias,
                                int N, int C, Stream stream);

// Device scratch layernorm_backward needs: layernorm_backward_scratch_bytes
// of kernels/cuda/scratch_sizes.h (the parameter gradients' partial sums,
// reduced in a fixed order).
void layernorm_backward(DType dt, DType grad_dt, void* dinp, GradWrite dinp_mode, void* dweight,
                        void* dbias, GradWrite param_mode, const void* dout, const void* inp,
                        const void* weight, const float* mean, const float* rstd, int N, int C,
                        void* scratch, Stream stream);

}  // namespace srkit::cuda
