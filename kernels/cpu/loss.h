// The classifier's loss on the CPU: softmax cross-entropy over the padded
// vocabulary, and the softmax of one row for sampling.
// Shapes, storage types and gradient-write conventions: kernels/cpu/elements.h;
// the CUDA launcher of the same name is kernels/cuda/loss.h, the op table
// docs/architecture.md ("Ops").
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/elements.h"

namespace srkit::cpu {

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

}  // namespace srkit::cpu
