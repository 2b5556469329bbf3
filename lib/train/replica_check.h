// The replica audit of data-parallel training: a checksum that ranks compare
// cheaply (checksum_bytes, lib/util/checksum.h), and, when checksums differ, how
// far two copies of the weights are apart in units in the last place (ulps) of
// their storage type.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/dtype.h"
#include "lib/util/checksum.h"

namespace srkit {

// Distance in ulps between two values of a storage type: the number of
// representable values between them, counting +0 and -0 as one value. Values
// are compared by bit pattern order, so +-Inf are one step past the largest
// finite value and NaNs sit beyond them (a NaN against a number is a huge distance).
uint64_t ulp_distance_f32(uint32_t a_bits, uint32_t b_bits);
uint64_t ulp_distance_bf16(uint16_t a_bits, uint16_t b_bits);

struct UlpDivergence {
  uint64_t differing = 0;  // elements whose bits differ (+0 vs -0 included)
  uint64_t max_ulps = 0;   // largest distance
  size_t max_index = 0;    // first element at that distance
};

// Element-wise comparison of n values of dtype.
UlpDivergence ulp_divergence(DType dtype, const void* a, const void* b, size_t n);

}  // namespace srkit
