// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"),
// the generator cuRAND names CURAND_RNG_PSEUDO_PHILOX4_32_10. A pure function of
// a 128-bit counter and a 64-bit key; host+device so the CPU reproduces the GPU.
#pragma once

#include <cstdint>

#include "kernels/common/hd.h"

namespace srkit {

struct Philox4 {
  uint32_t v[4];
};

namespace philox_detail {
constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kW1 = 0xBB67AE85u;  // sqrt(3) - 1

SRKIT_HD void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = uint64_t(a) * uint64_t(b);
  hi = uint32_t(p >> 32);
  lo = uint32_t(p);
}
}  // namespace philox_detail

// counter (c0,c1,c2,c3) = cuRAND's ctr (x,y,z,w); key (k0,k1) = its (key.x, key.y).
SRKIT_HD Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                               uint32_t k1) {
  using namespace philox_detail;
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, c0, hi0, lo0);
    mulhilo(kM1, c2, hi1, lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0;
    const uint32_t n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return Philox4{{c0, c1, c2, c3}};
}

}  // namespace srkit
