// What the CUDA attention keeps and the scratch it works in, as plain
// arithmetic (header-only, so lib/backend/attention_sizes.cpp can size the
// model's buffers for --device cuda without the CUDA backend being built).
//
// bf16 with head size 64 or 128 takes the fused flash path
// (kernels/cuda/flash_attention.h): its state is one fp32 log-sum-exp per row
// and its scratch one fp32 rowsum per row, O(B*NH*T). Every other shape:
// State per layer: each softmax row's maximum and sum (2 floats per row of
// [B,NH,T]), from which backward recomputes the probabilities bit for bit as
// forward made them, instead of keeping the [B,NH,T,T] matrix.
// Scratch, shared by all layers (each op uses it only during its own call):
//   - q, k, v and y as [B,NH,T,hs] in dt: the head-major operands of the
//     batched GEMMs; y is the head-major output in forward and the head-major
//     output gradient in backward;
//   - dq, dk, dv as [B,NH,T,hs] in fp32: backward's GEMM outputs, rounded once
//     when they are added into dinp (as the CPU rounds once);
//   - the scores [B,NH,T,T] in fp32 (backward: then dL/dP);
//   - the probabilities [B,NH,T,T] in dt (backward: then dL/dscores).
// Each region starts at a 256-byte boundary (cuBLASLt's preferred alignment).
#pragma once

#include <cstddef>

#include "kernels/common/dtype.h"

namespace srkit::cuda {

// Whether attention_forward/backward take the fused flash path
// (kernels/cuda/flash_attention.h): bf16 storage, head size 64 or 128. Other
// shapes and fp32 keep the batched-GEMM path described above.
inline bool flash_attention_supported(DType dt, int C, int NH) {
  if (dt != DType::kBF16 || C <= 0 || NH <= 0 || C % NH != 0) return false;
  const int hs = C / NH;
  return hs == 64 || hs == 128;
}

// The flash path's state: forward's log-sum-exp per row, [B,NH,T] fp32.
inline size_t flash_attention_state_bytes(int B, int T, int NH) {
  return size_t(B) * size_t(NH) * size_t(T) * sizeof(float);
}

// The flash backward's scratch: rowsum(dout * out) per row, [B,NH,T] fp32.
inline size_t flash_attention_backward_scratch_bytes(int B, int T, int NH) {
  return size_t(B) * size_t(NH) * size_t(T) * sizeof(float);
}

struct AttentionLayout {
  size_t state_per_layer = 0;  // bytes
  size_t head_tensor = 0;      // bytes of one [B,NH,T,hs] tensor in dt
  size_t head_grad = 0;        // bytes of one [B,NH,T,hs] tensor in fp32
  size_t scores = 0;           // bytes of the fp32 [B,NH,T,T] scores
  size_t probs = 0;            // bytes of the [B,NH,T,T] probabilities in dt
  // The flash path: none of the above but its backward's rowsums (and the state).
  bool flash = false;
  size_t flash_scratch = 0;  // bytes

  // The dt head tensors q, k, v, y, one after another at head_stride() bytes.
  enum Head : int { kQ = 0, kK = 1, kV = 2, kY = 3 };
  static constexpr int kHeadTensors = 4;
  // The fp32 gradients dq, dk, dv, one after another at grad_stride() bytes.
  static constexpr int kGradTensors = 3;

  size_t head_stride() const { return align(head_tensor); }
  size_t grad_stride() const { return align(head_grad); }
  size_t head_offset(int i) const { return size_t(i) * head_stride(); }
  size_t grad_offset(int i) const {
    return kHeadTensors * head_stride() + size_t(i) * grad_stride();
  }
  size_t scores_offset() const { return grad_offset(kGradTensors); }
  size_t probs_offset() const { return scores_offset() + align(scores); }
  size_t flash_scratch_offset() const { return probs_offset() + align(probs); }
  size_t scratch() const { return flash_scratch_offset() + align(flash_scratch); }
  static constexpr size_t align(size_t bytes) { return (bytes + 255) / 256 * 256; }
};

inline AttentionLayout attention_layout(DType dt, int B, int T, int C, int NH) {
  const size_t es = dtype_size(dt);
  const size_t rows = size_t(B) * size_t(NH) * size_t(T);
  const size_t elements = size_t(B) * size_t(T) * size_t(C);  // of one head tensor
  AttentionLayout l;
  if (flash_attention_supported(dt, C, NH)) {
    l.flash = true;
    l.state_per_layer = flash_attention_state_bytes(B, T, NH);
    l.flash_scratch = flash_attention_backward_scratch_bytes(B, T, NH);
    return l;
  }
  l.state_per_layer = rows * 2 * sizeof(float);
  l.head_tensor = elements * es;
  l.head_grad = elements * sizeof(float);
  l.scores = rows * size_t(T) * sizeof(float);
  l.probs = rows * size_t(T) * es;
  return l;
}

}  // namespace srkit::cuda
