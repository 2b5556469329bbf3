#include "lib/backend/attention_sizes.h"

#include "kernels/cuda/attention_layout.h"

namespace srkit {

AttentionSizes attention_sizes(DeviceKind device, DType dt, int B, int T, int C, int NH) {
  const size_t scores = size_t(B) * size_t(NH) * size_t(T) * size_t(T);  // [B,NH,T,T]
  AttentionSizes s;
  if (device == DeviceKind::kCpu) {
    s.state_per_layer = scores * dtype_size(dt);
  } else {
    const cuda::AttentionLayout l = cuda::attention_layout(dt, B, T, C, NH);
    s.state_per_layer = l.state_per_layer;
    s.scratch = l.scratch();
  }
  return s;
}

}  // namespace srkit
