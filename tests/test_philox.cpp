// Philox4x32-10 known answers and the random-bits contract (kernels/common/
// sr_bits.h): purity, independence of every input, counter/key layout, lane
// layout, and the vectorized 256-element batch (kernels/cpu/philox_simd.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "kernels/common/philox.h"
#include "kernels/common/sr_bits.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/philox_simd.h"

namespace srkit {
namespace {

struct Kat {
  uint32_t ctr[4], key[2], out[4];
};

// Random123's kat_vectors for philox4x32_10 (also listed in docs/architecture.md).
TEST(Philox, Random123KnownAnswers) {
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& k : kats) {
    const Philox4 r = philox4x32_10(k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3], k.key[0], k.key[1]);
    for (int w = 0; w < 4; ++w) {
      EXPECT_EQ(r.v[w], k.out[w]) << "word " << w << " for counter 0x" << std::hex << k.ctr[0];
    }
  }
}

// sr_block places (seed, purpose, step, group) as documented, which is also
// cuRAND's curand_init(seed, subsequence, 4 * group) layout.
TEST(SrBits, CounterAndKeyLayout) {
  const uint64_t seed = 0x0123456789abcdefull, step = 0x0000beefcafe1234ull;
  const uint64_t group = 0x00000007fffffffeull;
  const RngPurpose purpose = RngPurpose::kCast;  // 4
  EXPECT_EQ(sr_subsequence(purpose, step), (uint64_t(4) << 48) | step);
  EXPECT_EQ(sr_subsequence(purpose, kSrMaxStep), (uint64_t(4) << 48) | kSrMaxStep);
  const Philox4 expected =
      philox4x32_10(0xfffffffeu, 0x7u, 0xcafe1234u, (4u << 16) | 0xbeefu, 0x89abcdefu, 0x01234567u);
  const Philox4 got = sr_block(seed, purpose, step, group);
  for (int w = 0; w < 4; ++w) EXPECT_EQ(got.v[w], expected.v[w]) << "word " << w;
}

// Element i uses word (i % 8) / 2 of block i / 8: the low half for even i.
TEST(SrBits, LaneLayout) {
  const uint64_t seed = 42, step = 7;
  const RngPurpose purpose = RngPurpose::kCast;
  for (uint64_t group : {uint64_t(0), uint64_t(5), uint64_t(1) << 33}) {
    const Philox4 b = sr_block(seed, purpose, step, group);
    for (unsigned k = 0; k < 8; ++k) {
      const uint32_t word = b.v[k / 2];
      const uint32_t expected = (k % 2 == 0) ? (word & 0xffffu) : (word >> 16);
      EXPECT_EQ(sr_bits16(seed, purpose, step, 8 * group + k), expected) << "lane " << k;
      EXPECT_EQ(sr_lane(b, k), expected) << "lane " << k;
    }
  }
}

TEST(SrBits, PureFunction) {
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(sr_bits16(9, RngPurpose(2), 3, i), sr_bits16(9, RngPurpose(2), 3, i));
    EXPECT_EQ(sr_bits16(9, RngPurpose::kFirstMoment, 3, i), sr_bits16(9, RngPurpose(2), 3, i));
    EXPECT_LE(sr_bits16(9, RngPurpose(2), 3, i), 0xffffu);
  }
}

// Changing any one input changes the whole 128-bit block (a chance of 2^-128
// to be equal by accident), so no two streams share bits.
TEST(SrBits, EveryInputMatters) {
  auto block = [](uint64_t seed, uint32_t purpose, uint64_t step, uint64_t group) {
    const Philox4 b = sr_block(seed, RngPurpose(uint16_t(purpose)), step, group);
    return std::make_tuple(b.v[0], b.v[1], b.v[2], b.v[3]);
  };
  const auto base = block(1, 1, 1, 1);
  EXPECT_NE(block(2, 1, 1, 1), base) << "seed";
  EXPECT_NE(block(uint64_t(1) | (uint64_t(1) << 32), 1, 1, 1), base) << "seed high word";
  EXPECT_NE(block(1, 2, 1, 1), base) << "purpose";
  EXPECT_NE(block(1, 1, 2, 1), base) << "step";
  EXPECT_NE(block(1, 1, uint64_t(1) | (uint64_t(1) << 40), 1), base) << "step high bits";
  EXPECT_NE(block(1, 1, 1, 2), base) << "group";
  EXPECT_NE(block(1, 1, 1, uint64_t(1) | (uint64_t(1) << 32)), base) << "group high word";

  // Within a stream: 4096 consecutive blocks are pairwise distinct, and so are
  // the first blocks of 64 steps and of all purposes.
  std::set<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>> seen;
  for (uint64_t g = 0; g < 4096; ++g) seen.insert(block(5, 4, 0, g));
  for (uint64_t s = 1; s < 64; ++s) seen.insert(block(5, 4, s, 0));
  for (uint32_t p = 1; p <= uint32_t(RngPurpose::kUser); ++p) {
    if (p != 4) seen.insert(block(5, p, 0, 0));
  }
  EXPECT_EQ(seen.size(), 4096u + 63u + 15u);
}

// A step past the contract's 48 bits would spill into the purpose: it is
// refused, not masked.
TEST(SrBits, StepOutsideTheBudgetIsRejected) {
  EXPECT_NO_THROW(check_sr_step("test", kSrMaxStep));
  EXPECT_THROW(check_sr_step("test", kSrMaxStep + 1), std::invalid_argument);
  std::vector<float> in(16, 1.0f);
  std::vector<bf16> out(16);
  EXPECT_THROW(cpu::cast_f32_to_bf16_sr(in.data(), out.data(), in.size(), 1, RngPurpose::kCast,
                                        kSrMaxStep + 1, 0),
               std::invalid_argument);
}

// The lanes look uniform: over 2^20 draws each of the 16 bits is set about
// half the time (binomial, 6 sigma = 0.003).
TEST(SrBits, BitsBalanced) {
  constexpr int kDraws = 1 << 20;
  int ones[16] = {};
  for (uint64_t i = 0; i < kDraws; ++i) {
    const uint32_t r = sr_bits16(123, RngPurpose::kCast, 0, i);
    for (int b = 0; b < 16; ++b) ones[b] += (r >> b) & 1u;
  }
  for (int b = 0; b < 16; ++b) EXPECT_NEAR(double(ones[b]) / kDraws, 0.5, 0.003) << "bit " << b;
}

// Every batch of a grid of seeds, counters and steps against sr_bits16, on the
// ISA in force.
void expect_batches_match_contract() {
  const uint64_t groups[] = {
      0, 1, 13, (uint64_t(1) << 32) - 3, (uint64_t(1) << 32) - 31, (uint64_t(1) << 45) + 17};
  const uint64_t seeds[] = {0, 0xdeadbeefcafef00dull};
  for (uint64_t seed : seeds) {
    for (uint64_t group0 : groups) {
      for (uint64_t step : {uint64_t(0), uint64_t(99), kSrMaxStep}) {
        uint16_t fast[cpu::kSrBitsBatch], portable[cpu::kSrBitsBatch];
        const cpu::SrStream stream = cpu::sr_stream(seed, RngPurpose(3), step);
        ASSERT_EQ(stream.avx512, cpu::cpu_isa() == cpu::CpuIsa::kAvx512);
        cpu::sr_bits_batch(stream, group0, fast);
        cpu::sr_bits_batch_portable(stream, group0, portable);
        for (size_t e = 0; e < cpu::kSrBitsBatch; ++e) {
          const uint32_t expected = sr_bits16(seed, RngPurpose(3), step, 8 * group0 + e);
          ASSERT_EQ(fast[e], expected) << "group0 " << group0 << " element " << e;
          ASSERT_EQ(portable[e], expected) << "group0 " << group0 << " element " << e;
        }
      }
    }
  }
}

// The vectorized batch (AVX2 on x86-64-v3 builds, and AVX-512 where the CPU has
// it: every ISA of kernels/cpu/cpu_isa.h the CPU runs) and the portable path
// give sr_bits16 exactly, including groups whose counter crosses 2^32.
TEST(SrBits, BatchMatchesContract) {
  for (cpu::CpuIsa isa : cpu::runnable_cpu_isas()) {
    const cpu::ScopedCpuIsa forced(isa);
    SCOPED_TRACE(cpu::cpu_isa_name(isa));
    expect_batches_match_contract();
  }
}

}  // namespace
}  // namespace srkit
