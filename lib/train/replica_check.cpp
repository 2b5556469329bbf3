#include "lib/train/replica_check.h"

#include <cstring>

namespace srkit {
namespace {

// Sign-magnitude bits -> a signed integer that grows with the value; both zeros
// map to 0.
int64_t ordered(uint64_t bits, int width) {
  const uint64_t sign = uint64_t(1) << (width - 1);
  const int64_t magnitude = int64_t(bits & (sign - 1));
  return (bits & sign) ? -magnitude : magnitude;
}

uint64_t distance(uint64_t a, uint64_t b, int width) {
  const int64_t x = ordered(a, width), y = ordered(b, width);
  return x > y ? uint64_t(x - y) : uint64_t(y - x);
}

}  // namespace

uint64_t ulp_distance_f32(uint32_t a_bits, uint32_t b_bits) { return distance(a_bits, b_bits, 32); }

uint64_t ulp_distance_bf16(uint16_t a_bits, uint16_t b_bits) {
  return distance(a_bits, b_bits, 16);
}

UlpDivergence ulp_divergence(DType dtype, const void* a, const void* b, size_t n) {
  UlpDivergence out;
  for (size_t i = 0; i < n; ++i) {
    uint64_t d;
    bool differ;
    if (dtype == DType::kF32) {
      uint32_t x, y;
      std::memcpy(&x, static_cast<const char*>(a) + 4 * i, 4);
      std::memcpy(&y, static_cast<const char*>(b) + 4 * i, 4);
      differ = x != y;
      d = ulp_distance_f32(x, y);
    } else {
      uint16_t x, y;
      std::memcpy(&x, static_cast<const char*>(a) + 2 * i, 2);
      std::memcpy(&y, static_cast<const char*>(b) + 2 * i, 2);
      differ = x != y;
      d = ulp_distance_bf16(x, y);
    }
    out.differing += differ;
    if (d > out.max_ulps) {
      out.max_ulps = d;
      out.max_index = i;
    }
  }
  return out;
}

}  // namespace srkit
