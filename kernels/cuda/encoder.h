// The token and position embedding on a CUDA device (kernels/cuda/encoder.cu):
// the lookup forward, and the backward, deterministic and bit-equal to the CPU's
// (kernels/cpu/encoder.cpp): dwpe[t] += the sum over b of dout[b,t] (b in order), and dwte[tok] +=
// the sum of dout over the positions holding tok (positions in order), each sum in fp32 and rounded
// once into the stored value. The grouping of positions by token is planned on the host from the
// tokens the host already has (EncoderBackwardPlan), uploaded by the caller, and read by the
// kernel: no atomics, no device sort.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/common/dtype.h"
#include "kernels/cuda/stream.h"

namespace srkit::cuda {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:].
void encoder_forward(DType dt, void* out, const int32_t* tokens, const void* wte, const void* wpe,
                     int B, int T, int C, Stream stream);

class EncoderBackwardPlan {
 public:
  // Groups the N positions by token (a stable sort: positions in order within
  // a group). Reuses its buffers: no allocation once they have grown to N.
  void build(const int32_t* host_tokens, int N);
  int groups() const { return int(group_token_.size()); }
  // The plan as one block of 3N + 1 int32 for the kernel, at offsets fixed by
  // N alone: the positions in group order [0, N), the groups' starts in that
  // order [N, N + groups + 1), the groups' tokens [2N + 1, 2N + 1 + groups),
  // zeros after. Its size depends only on N, so the device buffer it is
  // copied to (as is) never grows after the first step.
  const int32_t* packed() const { return packed_.data(); }
  size_t packed_bytes() const { return packed_.size() * sizeof(int32_t); }

 private:
  std::vector<int32_t> order_, group_start_, group_token_, packed_;
};

// Accumulates into dwte and dwpe, stored as grad_dt (dt, or f32 with bf16
// dt). device_plan: the plan's packed() block in device memory (built from the
// same tokens as dout's positions).
void encoder_backward(DType dt, DType grad_dt, void* dwte, void* dwpe, const void* dout,
                      const void* device_plan, int groups, int B, int T, int C, Stream stream);

}  // namespace srkit::cuda
