// Causal multi-head self-attention on the CPU.
// Shapes, storage types and gradient-write conventions: kernels/cpu/elements.h;
// the CUDA launcher of the same name is kernels/cuda/attention.h, the op table
// docs/architecture.md ("Ops").
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/elements.h"

namespace srkit::cpu {

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

}  // namespace srkit::cpu
