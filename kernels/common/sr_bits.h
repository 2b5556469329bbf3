// The random-bits contract (DESIGN.md): the 16 random bits that stochastic
// rounding consumes for one element are a pure function of
//   (seed, purpose, optimizer step, global element index)
// and of nothing else: not threads, sharding, world size or device.
//
// Layout, chosen to coincide with cuRAND's device API so a CUDA kernel may use
// either this function or curand_init/curand4 and draw identical bits:
//   key     = (seed low 32 bits, seed high 32 bits)
//   counter = (group low, group high, subsequence low, subsequence high)
//   group       = index / 8          (one Philox call covers 8 elements)
//   subsequence = purpose << 48 | step   (step < 2^48)
// i.e. curand_init(seed, subsequence, /*offset=*/4 * group, &st); curand4(&st)
// returns the same 128 bits. Element index i takes 16-bit lane i % 8: word
// (i % 8) / 2, low half for even i, high half for odd i.
#pragma once

#include <cstdint>

#include "kernels/common/hd.h"
#include "kernels/common/philox.h"

namespace srkit {

// Why a stream of bits is drawn. Distinct purposes never share bits, so the
// weight update, the moment updates and an audit at the same step are independent.
enum class RngPurpose : uint32_t {
  kWeightUpdate = 1,
  kFirstMoment = 2,
  kSecondMoment = 3,
  kCast = 4,      // array casts (benchmarks, audits, tests)
  kGradient = 5,  // gradient rounding (e.g. bf16 reductions)
  kKahan = 6,     // compensation buffer updates
  kUser = 16,     // first value free for experiments
};

constexpr int kSrElementsPerPhilox = 8;
constexpr uint64_t kSrMaxStep = (uint64_t(1) << 48) - 1;

SRKIT_HD uint64_t sr_subsequence(uint32_t purpose, uint64_t step) {
  return (uint64_t(purpose) << 48) | (step & kSrMaxStep);
}

// 128 bits = the 16-bit lanes of elements 8*group .. 8*group+7.
SRKIT_HD Philox4 sr_block(uint64_t seed, uint32_t purpose, uint64_t step, uint64_t group) {
  const uint64_t sub = sr_subsequence(purpose, step);
  return philox4x32_10(uint32_t(group), uint32_t(group >> 32), uint32_t(sub), uint32_t(sub >> 32),
                       uint32_t(seed), uint32_t(seed >> 32));
}

// Lane k (0..7) of a block.
SRKIT_HD uint32_t sr_lane(const Philox4& block, unsigned k) {
  const uint32_t word = block.v[(k >> 1) & 3u];
  return (k & 1u) ? (word >> 16) : (word & 0xffffu);
}

// The contract as one function: 16 random bits for one element.
SRKIT_HD uint32_t sr_bits16(uint64_t seed, uint32_t purpose, uint64_t step, uint64_t index) {
  return sr_lane(sr_block(seed, purpose, step, index >> 3), unsigned(index & 7u));
}

SRKIT_HD uint32_t sr_bits16(uint64_t seed, RngPurpose purpose, uint64_t step, uint64_t index) {
  return sr_bits16(seed, uint32_t(purpose), step, index);
}

}  // namespace srkit
