// The random-bits contract (kernels/common/sr_bits.h) is cuRAND's device API:
// curand_init(seed, sr_subsequence(purpose, step), 4 * group) followed by
// curand4 returns sr_block(seed, purpose, step, group), and the next curand4
// the block of group + 1. A CPU test: nvcc compiles the real curand_kernel.h
// for the host when QUALIFIERS makes its functions host+device; built only
// when nvcc is (absent otherwise, and in the CPU emulation).
#define QUALIFIERS static __forceinline__ __host__ __device__
#include <curand_kernel.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/common/sr_bits.h"

namespace srkit {
namespace {

// Compares the contract with cuRAND at (seed, purpose, step, group) and at the
// following group (curand4's own counter increment, carries included).
void expect_same(uint64_t seed, uint32_t purpose_bits, uint64_t step, uint64_t group) {
  const RngPurpose purpose = RngPurpose(uint16_t(purpose_bits));
  curandStatePhilox4_32_10_t st;
  curand_init(seed, sr_subsequence(purpose, step), 4 * group, &st);
  for (uint64_t g = group; g < group + 2; ++g) {
    const uint4 r = curand4(&st);
    const Philox4 b = sr_block(seed, purpose, step, g);
    const uint32_t got[4] = {r.x, r.y, r.z, r.w};
    for (int w = 0; w < 4; ++w) {
      ASSERT_EQ(got[w], b.v[w]) << "seed " << seed << " purpose " << purpose_bits << " step "
                                << step << " group " << g << " word " << w;
    }
  }
}

TEST(CurandContract, EdgesOfEveryWord) {
  const uint64_t seeds[] = {0,    1, 0xC0FFEE, 0xffffffffull, 1ull << 32, 0xdeadbeefcafef00dull,
                            ~0ull};
  const uint32_t purposes[] = {1, 2, 3, 4, 5, 6, 16, 0xffff};
  const uint64_t steps[] = {
      0, 1, 0xffffffffull, 1ull << 32, (1ull << 32) + 1, kSrMaxStep - 1, kSrMaxStep};
  const uint64_t groups[] = {
      0, 1, 0xfffffffeull, 0xffffffffull, 1ull << 32, (1ull << 40) + 123, (1ull << 61) - 2};
  for (uint64_t seed : seeds) {
    for (uint32_t purpose : purposes) {
      for (uint64_t step : steps) {
        for (uint64_t group : groups) expect_same(seed, purpose, step, group);
      }
    }
  }
}

TEST(CurandContract, RandomSweep) {
  std::mt19937_64 rng(20240520);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t seed = rng();
    const uint32_t purpose = uint32_t(rng() & 0xffff);
    const uint64_t step = rng() & kSrMaxStep;
    const uint64_t group = rng() >> 3;  // an element index / 8
    expect_same(seed, purpose, step, group);
  }
}

}  // namespace
}  // namespace srkit
