// What causal self-attention keeps per layer for backward, and the scratch it
// shares across layers, per backend (Backend::attention_sizes). The model
// allocates exactly these bytes, and the memory model (lib/train/memory_model.h)
// asks the same function, so its activation term stays exact for every device.
#pragma once

#include <cstddef>

#include "kernels/common/dtype.h"
#include "lib/backend/device_kind.h"

namespace srkit {

struct AttentionSizes {
  size_t state_per_layer = 0;  // bytes saved by forward for backward, per layer
  size_t scratch = 0;          // bytes of working space shared by all layers
};

// device: the backend's kind (Backend::kind()).
//   cpu:  state = the attention matrix att [B,NH,T,T] in dt; no scratch (the
//         kernels work in per-thread buffers).
//   cuda: state = each softmax row's maximum and sum [B,NH,T] x 2 fp32 (the
//         attention matrix is recomputed in backward); scratch = head-major
//         q, k, v and output (or its gradient) [B,NH,T,hs] in dt, the q, k, v
//         gradients [B,NH,T,hs] in fp32, the scores [B,NH,T,T] in fp32 and the
//         probabilities [B,NH,T,T] in dt (kernels/cuda/attention_layout.h).
AttentionSizes attention_sizes(DeviceKind device, DType dt, int B, int T, int C, int NH);

}  // namespace srkit
