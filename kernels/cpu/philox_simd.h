// The CPU's one vectorized Philox4x32-10: the SR random bits of the contract
// (kernels/common/sr_bits.h) for 256 consecutive elements (32 Philox groups)
// at a time, for loops that round at memory speed (the array casts, AdamW).
//
// bits[e] == sr_bits16(seed, purpose, step, 8 * group0 + e) for e in [0, 256);
// a batch starts at a group boundary (element index 8 * group0).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/sr_bits.h"

namespace srkit::cpu {

constexpr size_t kSrBatchGroups = 32;
constexpr size_t kSrBitsBatch = kSrBatchGroups * kSrElementsPerPhilox;  // 256 elements
constexpr int kPhiloxRounds = 10;

// (seed, purpose, step) as the high counter words and the key of every round,
// computed once per array (or optimizer step and purpose) rather than per
// batch, and the instruction set the batches use (kernels/cpu/cpu_isa.h, read
// when the stream is made: outside the parallel loops that draw from it).
struct SrStream {
  uint32_t sub_lo, sub_hi;
  uint32_t key0[kPhiloxRounds], key1[kPhiloxRounds];
  bool avx512 = false;
};

SrStream sr_stream(uint64_t seed, RngPurpose purpose, uint64_t step);

// The batch of groups group0 .. group0 + 31: AVX-512 when the stream says so,
// else AVX2 on x86-64-v3 builds, else the portable form. Same bits on every path.
void sr_bits_batch(const SrStream& s, uint64_t group0, uint16_t* bits);

// The same bits without intrinsics, so tests cover that path on AVX2 builds.
void sr_bits_batch_portable(const SrStream& s, uint64_t group0, uint16_t* bits);

}  // namespace srkit::cpu
