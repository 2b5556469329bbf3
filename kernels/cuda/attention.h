// Causal self-attention on a CUDA device (kernels/cuda/attention.cu):
// cuBLASLt strided-batched GEMMs for the scores and the weighted values, and a
// causal softmax kernel with the CPU's element math (exp_poly, max subtracted,
// probabilities rounded to dt before they weight v). Forward keeps only each
// row's softmax statistics (kernels/cuda/attention_layout.h); backward
// recomputes the probabilities from them exactly as forward made them. All
// scratch lives in the caller's buffer of attention_layout(...).scratch() bytes,
// which neither call expects to hold anything from an earlier call. Both throw
// std::invalid_argument unless B, T, C, NH > 0 and NH divides C.
#pragma once

#include "kernels/common/dtype.h"
#include "kernels/common/grad_write.h"
#include "kernels/cuda/attention_layout.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/stream.h"

namespace srkit::cuda {

// inp: [B,T,3C] (q,k,v); out: [B,T,C]; state: attention_layout().state_per_layer bytes.
void attention_forward(Gemm& gemm, DType dt, void* out, void* state, void* scratch, const void* inp,
                       int B, int T, int C, int NH, Stream stream);
// dinp: [B,T,3C], written or accumulated into (rounded once); state:
// forward's. out (forward's output) is not read: rowsum(P * dP) is summed
// directly rather than as rowsum(dout * out).
void attention_backward(Gemm& gemm, DType dt, void* dinp, GradWrite dinp_mode, const void* dout,
                        const void* inp, const void* out, const void* state, void* scratch, int B,
                        int T, int C, int NH, Stream stream);

}  // namespace srkit::cuda
