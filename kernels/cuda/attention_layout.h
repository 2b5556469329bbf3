// What the CUDA attention keeps and the scratch it works in, as plain
// arithmetic (header-only, so lib/backend/attention_sizes.cpp can size the
// model's buffers for --device cuda without the CUDA backend being built).
//
// State per layer: each softmax row's maximum and sum (2 floats per row of
// [B,NH,T]), from which backward recomputes the probabilities bit for bit as
// forward made them, instead of keeping the [B,NH,T,T] matrix.
// Scratch, shared by all layers: q, k, v and the head-major output (and in
// backward their gradients) as [B,NH,T,hs] in dt, the scores [B,NH,T,T] in
// fp32 and the probabilities [B,NH,T,T] in dt.
#pragma once

#include <cstddef>

#include "kernels/common/dtype.h"

namespace srkit::cuda {

struct AttentionLayout {
  size_t state_per_layer = 0;  // bytes
  size_t head_tensor = 0;      // bytes of one [B,NH,T,hs] tensor in dt
  size_t scores = 0;           // bytes of the fp32 [B,NH,T,T] scores
  size_t probs = 0;            // bytes of the [B,NH,T,T] probabilities in dt
  // Scratch offsets: q, k, v, y (the head-major output or its gradient), dq,
  // dk, dv, then the scores and the probabilities; each 256-byte aligned.
  static constexpr int kHeadTensors = 7;
  size_t head_offset(int i) const { return size_t(i) * align(head_tensor); }
  size_t scores_offset() const { return kHeadTensors * align(head_tensor); }
  size_t probs_offset() const { return scores_offset() + align(scores); }
  size_t scratch() const { return probs_offset() + align(probs); }
  static constexpr size_t align(size_t bytes) { return (bytes + 255) / 256 * 256; }
};

inline AttentionLayout attention_layout(DType dt, int B, int T, int C, int NH) {
  const size_t es = dtype_size(dt);
  const size_t rows = size_t(B) * size_t(NH) * size_t(T);
  AttentionLayout l;
  l.state_per_layer = rows * 2 * sizeof(float);
  l.head_tensor = size_t(B) * size_t(T) * size_t(C) * es;
  l.scores = rows * size_t(T) * sizeof(float);
  l.probs = rows * size_t(T) * es;
  return l;
}

}  // namespace srkit::cuda
