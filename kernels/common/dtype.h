// Storage types of tensors. Arithmetic is always fp32 (or wider); these name
// only how values sit in memory.
#pragma once

#include <cstddef>
#include <cstdint>

namespace srkit {

enum class DType : uint8_t { kF32 = 0, kBF16 = 1 };

inline size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }
inline const char* dtype_name(DType t) { return t == DType::kF32 ? "f32" : "bf16"; }

}  // namespace srkit
