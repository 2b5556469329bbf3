#include "lib/checkpoint/value_check.h"

#include <cstdint>

namespace srkit {
namespace {

// Bits is uint16_t (bf16) or uint32_t (f32): the exponent field all ones means
// Inf or NaN; above the sign bit alone (-0) means a negative number or NaN.
template <typename Bits>
unsigned bad(Bits x, unsigned non_negative) {
  constexpr Bits kExponent = sizeof(Bits) == 2 ? Bits(0x7f80) : Bits(0x7f800000u);
  constexpr Bits kSign = Bits(Bits(1) << (8 * sizeof(Bits) - 1));
  return unsigned((x & kExponent) == kExponent) | (non_negative & unsigned(x > kSign));
}

template <typename Bits>
BadValue first_bad(const Bits* v, size_t n, unsigned non_negative) {
  constexpr size_t kBlock = 4096;
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t end = begin + kBlock < n ? begin + kBlock : n;
    unsigned any = 0;
    for (size_t i = begin; i < end; ++i) any |= bad(v[i], non_negative);
    if (!any) continue;
    for (size_t i = begin; i < end; ++i) {
      if (bad(v[i], non_negative)) return {i, bad(v[i], 0) != 0};
    }
  }
  return {n, false};
}

}  // namespace

BadValue first_bad_value(DType dtype, const void* data, size_t n, bool non_negative) {
  if (dtype == DType::kF32) return first_bad(static_cast<const uint32_t*>(data), n, non_negative);
  return first_bad(static_cast<const uint16_t*>(data), n, non_negative);
}

}  // namespace srkit
