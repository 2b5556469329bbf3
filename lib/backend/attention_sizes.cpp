#include "lib/backend/attention_sizes.h"

#include <stdexcept>

namespace srkit {

AttentionSizes attention_sizes(const std::string& device, DType dt, int B, int T, int C, int NH) {
  const size_t es = dtype_size(dt);
  const size_t rows = size_t(B) * size_t(NH) * size_t(T);  // softmax rows
  const size_t scores = rows * size_t(T);                  // [B,NH,T,T]
  const size_t btc = size_t(B) * size_t(T) * size_t(C);
  AttentionSizes s;
  if (device == "cpu") {
    s.state_per_layer = scores * es;
  } else if (device == "cuda") {
    s.state_per_layer = rows * sizeof(float);
    s.scratch = 5 * btc * es + scores * (sizeof(float) + es);
  } else {
    throw std::invalid_argument("--device: expected cpu or cuda (got '" + device + "')");
  }
  return s;
}

}  // namespace srkit
