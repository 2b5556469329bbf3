// Random numbers of the data pipeline. They follow the random-bits contract of
// kernels/common/sr_bits.h (Philox4x32-10 keyed by the seed, a purpose and a
// step in the counter), under purposes of their own (RngPurpose::kDataWindows,
// kSynthetic) so they never share bits with the optimizer's streams.
#pragma once

#include <cstdint>

#include "kernels/common/sr_bits.h"

namespace srkit {

// A uniform integer in [0, n) from 64 uniform bits: floor(bits * n / 2^64)
// (Lemire's multiply-high). No modulo: each value has floor or ceil of 2^64 / n
// preimages, so probabilities are off by at most a factor 1 + n / 2^64,
// below 1e-9 for any stream that fits in memory.
inline uint64_t uniform_below(uint64_t bits, uint64_t n) {
  return uint64_t((static_cast<unsigned __int128>(bits) * n) >> 64);
}

// 64 bits of one Philox block.
inline uint64_t philox_u64(const Philox4& block) {
  return uint64_t(block.v[0]) | (uint64_t(block.v[1]) << 32);
}

// Sequential draws for generators that consume a variable number of values
// (the synthetic corpus): block k of (seed, purpose, step 0), 64 bits per draw.
class PhiloxStream {
 public:
  PhiloxStream(uint64_t seed, RngPurpose purpose) : seed_(seed), purpose_(purpose) {}
  uint64_t next_u64() {
    if (half_ == 0) block_ = sr_block(seed_, purpose_, 0, counter_++);
    const uint64_t out =
        half_ == 0 ? philox_u64(block_) : (uint64_t(block_.v[2]) | (uint64_t(block_.v[3]) << 32));
    half_ ^= 1;
    return out;
  }
  // Uniform in [0, n).
  uint64_t below(uint64_t n) { return uniform_below(next_u64(), n); }
  // Uniform in [lo, hi] (inclusive).
  int64_t range(int64_t lo, int64_t hi) { return lo + int64_t(below(uint64_t(hi - lo) + 1)); }

 private:
  uint64_t seed_;
  RngPurpose purpose_;
  uint64_t counter_ = 0;
  Philox4 block_{};
  int half_ = 0;
};

}  // namespace srkit
