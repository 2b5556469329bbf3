// GPT-2 forward/backward ops on the CPU, one function per op, each for fp32 and
// bf16 storage (T = float or bf16). Arithmetic and accumulation are fp32;
// bf16 outputs are rounded to nearest even once per output element. The
// backward ops that produce parameter gradients store them as G: T, or fp32
// with bf16 activations (AdamWRule::grads; fp32 gradients are not rounded). Results do
// not depend on the number of OpenMP threads (fixed reduction orders).
//
// Conventions (as llm.c): row-major; N = B*T rows; weights of a linear layer are
// [OC, C] (out = inp @ weight^T + bias). Backward functions store each gradient
// output by its GradWrite (kernels/common/grad_write.h): kAccumulate adds into
// the buffer (d* += ...), kOverwrite replaces it; with it the residual stream's
// gradient sums and gradient accumulation over micro-batches need neither extra
// buffers nor clears. The embedding backward always accumulates.
//
// Ops taking a Workspace use its slots as scratch for the duration of the call:
// any of them may overwrite every slot. Bad shapes or targets throw
// std::invalid_argument naming the op and the offending value.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/grad_write.h"
#include "kernels/cpu/workspace.h"

namespace srkit::cpu {

// Ops whose work (elements touched, or multiply-adds) is below this run on the
// calling thread: waking an OpenMP team costs more than it saves, and far more
// when the cores are shared and the team spins.
inline constexpr size_t kParallelMinWork = size_t(1) << 15;

// Element access for the two storage types: widening is exact; storing rounds to
// nearest even (the one rounding per output element).
inline float to_f32(float x) { return x; }
inline float to_f32(bf16 x) { return bf16_to_float(x); }
// What a gradient store adds its contribution to: the stored value, or zero.
template <typename T>
inline float grad_base(const T& stored, bool accumulate) {
  return accumulate ? to_f32(stored) : 0.0f;
}
template <typename T>
T from_f32(float x);
template <>
inline float from_f32<float>(float x) {
  return x;
}
template <>
inline bf16 from_f32<bf16>(float x) {
  return float_to_bf16_rn(x);
}

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]. Tokens must lie in [0, rows of wte).
template <typename T>
void encoder_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                     int C);
// dwte[tok] += sum of dout over the positions holding tok (positions in order);
// dwpe[t] += sum over b of dout[b,t]. Accumulates: both tables have rows no
// position touches (the model clears dwpe and writes dwte first elsewhere).
template <typename T, typename G>
void encoder_backward(G* dwte, G* dwpe, const T* dout, const int32_t* tokens, int B, int Tn, int C);

// out = (inp - mean) * rstd * weight + bias per row, eps 1e-5 (GPT-2).
// mean, rstd: [N] fp32 (saved for backward).
template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                       const T* bias, int N, int C);
template <typename T, typename G>
void layernorm_backward(T* dinp, GradWrite dinp_mode, G* dweight, G* dbias, GradWrite param_mode,
                        const T* dout, const T* inp, const T* weight, const float* mean,
                        const float* rstd, int N, int C);

// out[N,OC] = inp[N,C] @ weight[OC,C]^T (+ bias[OC] if not null): fp32
// accumulation over the whole of C, the bias added to the finished fp32 sum,
// one rounding per output element for bf16. The output is cut into tiles of a
// geometry fixed by the shape, each one single-threaded BLAS call
// (kernels/cpu/gemm.h), so the bits do not depend on the thread count. bf16
// operands are widened panel by panel in the workspace: see
// matmul_workspace_floats.
template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC,
                    Workspace& ws);
// dinp[N,C] += dout @ weight; dweight[OC,C] += dout^T @ inp; dbias[OC] += sum_n dout
// (dbias may be null; its column sums add the rows in order, in fp32). For bf16:
// the product is added to the widened old value in fp32, then rounded once.
// With accumulate_dinp (accumulate_params) false, dinp (dweight and dbias) is
// written as if it had been zero: the product alone (bf16: rounded once), the
// old contents ignored (they may be anything, NaN included).
template <typename T, typename G>
void matmul_backward(T* dinp, G* dweight, G* dbias, const T* dout, const T* inp, const T* weight,
                     int N, int C, int OC, Workspace& ws, bool accumulate_dinp = true,
                     bool accumulate_params = true);

// Floats of workspace the matmul ops hold for this shape with `threads`
// OpenMP threads (the larger of forward and backward; the workspace grows to
// it on the first call and stays): for bf16, per thread the widened operand
// panels and the fp32 tile of one output tile; 0 for fp32.
template <typename T>
size_t matmul_workspace_floats(int N, int C, int OC, int threads);

// Causal multi-head self-attention, direct O(T^2) form; C % NH == 0.
// inp: [B,T,3C] (q,k,v); out: [B,T,C]; att: [B,NH,T,T], what backward needs.
// scores = q.k / sqrt(C/NH) in fp32; att = softmax over t2 <= t (fp32, max
// subtracted); masked entries (t2 > t) are written as 0. out = att @ v uses att
// as stored (rounded for bf16), so the backward differentiates what forward used.
template <typename T>
void attention_forward(T* out, T* att, const T* inp, int B, int Tn, int C, int NH);
// dinp: [B,T,3C].
template <typename T>
void attention_backward(T* dinp, GradWrite dinp_mode, const T* dout, const T* inp, const T* att,
                        int B, int Tn, int C, int NH);

// GELU, tanh approximation (GPT-2).
template <typename T>
void gelu_forward(T* out, const T* inp, size_t n);
// dinp (+)= dout * gelu'(inp)
template <typename T>
void gelu_backward(T* dinp, GradWrite dinp_mode, const T* inp, const T* dout, size_t n);

template <typename T>
void residual_forward(T* out, const T* a, const T* b, size_t n);

// Softmax cross-entropy over the first V of Vp logits (padding never predicted).
// losses[N] fp32. targets[i] < 0 means "ignore" (loss 0, no gradient);
// targets[i] >= V throws.
template <typename T>
void crossentropy_forward(float* losses, const T* logits, const int32_t* targets, int N, int V,
                          int Vp);
// dlogits = (softmax(logits) - onehot(target)) * dloss. Overwrites dlogits
// (padding columns and ignored rows set to 0). dlogits may alias logits (in-place,
// as llm.c does to save the [N,Vp] buffer).
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

}  // namespace srkit::cpu
