// The random-bits contract (docs/architecture.md): the 16 random bits that stochastic
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
#include <stdexcept>
#include <string>

#include "kernels/common/hd.h"
#include "kernels/common/philox.h"

namespace srkit {

// Why a stream of bits is drawn: every random stream of srkit is one of these
// purposes, and distinct purposes never share bits (the weight update, the
// moment updates, an audit and the data order at the same step are independent).
// The 16-bit underlying type is the contract's budget for purposes, so a value
// that would not fit cannot be written.
enum class RngPurpose : uint16_t {
  kWeightUpdate = 1,
  kFirstMoment = 2,
  kSecondMoment = 3,
  kCast = 4,               // array casts (benchmarks, audits, tests)
  kGradient = 5,           // gradient rounding (e.g. bf16 reductions)
  kKahan = 6,              // compensation buffer updates
  kInit = 7,               // weight initialisation (GPT::init_weights)
  kSample = 8,             // token sampling after training (generate)
  kUser = 16,              // first value free for experiments (sr-audit accumulate draws here)
  kDataWindows = 0xDA7A,   // BatchSampler window starts
  kSynthetic = 0xDA7B,     // the built-in synthetic corpus
  kShadowSample = 0xFFFE,  // which parameters the shadow-FP32 probe follows
  kAuditData = 0xFFFF,     // sr-audit input values
};

constexpr int kSrElementsPerPhilox = 8;
constexpr uint64_t kSrMaxStep = (uint64_t(1) << 48) - 1;

// Host-side guard of the step budget: a step past 2^48 - 1 would spill into the
// purpose bits, so every entry point that takes a step from outside calls this
// instead of letting the bits be masked silently.
inline void check_sr_step(const char* who, uint64_t step) {
  if (step > kSrMaxStep) {
    throw std::invalid_argument(std::string(who) + ": step " + std::to_string(step) +
                                " exceeds the random-bits contract's 2^48 - 1");
  }
}

// step <= kSrMaxStep (check_sr_step): the purpose occupies the top 16 bits.
SRKIT_HD uint64_t sr_subsequence(RngPurpose purpose, uint64_t step) {
  return (uint64_t(purpose) << 48) | step;
}

// The contract's 128-bit block number `group` of stream (seed, purpose, step):
// for SR, the 16-bit lanes of elements 8*group .. 8*group+7; streams that want
// whole words (initialisation, sampling, data order) index it by their own counter.
SRKIT_HD Philox4 sr_block(uint64_t seed, RngPurpose purpose, uint64_t step, uint64_t group) {
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
SRKIT_HD uint32_t sr_bits16(uint64_t seed, RngPurpose purpose, uint64_t step, uint64_t index) {
  return sr_lane(sr_block(seed, purpose, step, index >> 3), unsigned(index & 7u));
}

}  // namespace srkit
