#include "lib/checkpoint/float_tensors.h"

#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/cast.h"

namespace srkit {

const char* safetensors_dtype_of(DType dtype) { return dtype == DType::kF32 ? "F32" : "BF16"; }

bool is_convertible_float_dtype(const std::string& d) {
  return d == "F32" || d == "F16" || d == "BF16";
}

void convert_float_elements(const void* src, const std::string& src_dtype, void* dst,
                            DType dst_dtype, size_t n) {
  if (!is_convertible_float_dtype(src_dtype)) {
    throw std::invalid_argument("dtype " + src_dtype + " is not a float dtype srkit converts " +
                                "(expected F32, F16 or BF16)");
  }
  if (src_dtype == safetensors_dtype_of(dst_dtype)) {
    std::memcpy(dst, src, n * dtype_size(dst_dtype));
    return;
  }
  if (src_dtype == "BF16") {  // to f32: exact
    cpu::cast_bf16_to_f32(static_cast<const bf16*>(src), static_cast<float*>(dst), n);
    return;
  }
  if (src_dtype == "F32") {  // to bf16: RN
    cpu::cast_f32_to_bf16_rn(static_cast<const float*>(src), static_cast<bf16*>(dst), n);
    return;
  }
  // F16: exact into f32; to bf16 through f32, which rounds once (RN), since
  // widening to f32 loses nothing.
  if (dst_dtype == DType::kF32) {
    cpu::cast_f16_to_f32(static_cast<const fp16*>(src), static_cast<float*>(dst), n);
    return;
  }
  std::vector<float> wide(n);
  cpu::cast_f16_to_f32(static_cast<const fp16*>(src), wide.data(), n);
  cpu::cast_f32_to_bf16_rn(wide.data(), static_cast<bf16*>(dst), n);
}

}  // namespace srkit
