// GPT-2 forward/backward ops on the CPU, one function per op, each for fp32 and
// bf16 storage (T = float or bf16). Arithmetic and accumulation are fp32;
// bf16 outputs are rounded to nearest even once per output element. Results do
// not depend on the number of OpenMP threads (fixed reduction orders).
//
// Conventions (as llm.c): row-major; N = B*T rows; weights of a linear layer are
// [OC, C] (out = inp @ weight^T + bias). Backward functions ACCUMULATE into
// their gradient outputs (d* += ...), so callers zero them when a new gradient
// begins; this is what makes gradient accumulation over micro-batches and the
// residual stream's gradient sums work without extra buffers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/cpu/workspace.h"

namespace srkit::cpu {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
template <typename T>
void encoder_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                     int C);
template <typename T>
void encoder_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int Tn, int C);

// mean, rstd: [N] fp32 (saved for backward).
template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                       const T* bias, int N, int C);
template <typename T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                        const float* mean, const float* rstd, int N, int C);

// out[N,OC] = inp[N,C] @ weight[OC,C]^T (+ bias[OC] if not null). BLAS sgemm on
// fp32 (bf16 operands widened into the workspace), fp32 accumulation.
template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC,
                    Workspace& ws);
// dinp[N,C] += dout @ weight; dweight[OC,C] += dout^T @ inp; dbias[OC] += sum_n dout
// (dbias may be null). For bf16: the GEMM result is added to the widened old
// value in fp32, then rounded once.
template <typename T>
void matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                     int N, int C, int OC, Workspace& ws);

// Causal multi-head self-attention, direct O(T^2) form.
// inp: [B,T,3C] (q,k,v); out: [B,T,C]; preatt, att: [B,NH,T,T].
template <typename T>
void attention_forward(T* out, T* preatt, T* att, const T* inp, int B, int Tn, int C, int NH);
// dinp: [B,T,3C]; dpreatt, datt: [B,NH,T,T] scratch (overwritten, not accumulated).
template <typename T>
void attention_backward(T* dinp, T* dpreatt, T* datt, const T* dout, const T* inp, const T* att,
                        int B, int Tn, int C, int NH);

// GELU, tanh approximation (GPT-2).
template <typename T>
void gelu_forward(T* out, const T* inp, size_t n);
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n);

template <typename T>
void residual_forward(T* out, const T* a, const T* b, size_t n);
// da += dout; db += dout
template <typename T>
void residual_backward(T* da, T* db, const T* dout, size_t n);

// Softmax cross-entropy over the first V of Vp logits (padding never predicted).
// losses[B*T] fp32. targets[i] < 0 means "ignore" (loss 0, no gradient).
template <typename T>
void crossentropy_forward(float* losses, const T* logits, const int32_t* targets, int N, int V,
                          int Vp);
// dlogits = (softmax(logits) - onehot(target)) * dloss, written in place of nothing
// (overwrites dlogits, padding columns set to 0).
template <typename T>
void crossentropy_backward(T* dlogits, const T* logits, const int32_t* targets, float dloss, int N,
                           int V, int Vp);

// Softmax of one row of logits (first V of Vp), into probs[V] fp32. For sampling.
template <typename T>
void softmax_row(float* probs, const T* logits, int V);

// Sum of squares of x[0..n) in fp64 over fixed 64K-element chunks added in
// order: the same bits for any thread count. Used for the global grad norm.
template <typename T>
double sum_squares(const T* x, size_t n);

// x = 0
template <typename T>
void fill_zero(T* x, size_t n);

}  // namespace srkit::cpu
