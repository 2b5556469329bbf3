// CPU array casts (kernels/cpu/cast.h): each element equals the per-element
// rule of kernels/common/bf16.h with the contract's bits, for any length,
// alignment, thread count and split of the array.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/sr_bits.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/cpu_isa.h"

namespace srkit {
namespace {

constexpr RngPurpose kPurpose = RngPurpose::kCast;

// Random bit patterns (every class: normals, subnormals, zeros, Inf, NaN) with
// extra specials sprinkled in.
std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed;
  const uint32_t specials[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                               0x00000001u, 0x80000000u, 0x7f7fffffu, 0x3f808000u};
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t u = uint32_t(s >> 32);
    v[i] = bits_as_float(i % 97 == 0 ? specials[(i / 97) % 8] : u);
  }
  return v;
}

// Lengths around the batch (64) and the OpenMP threshold, and a large odd one.
const size_t kLengths[] = {
    0, 1, 7, 63, 64, 65, 1000, (size_t(1) << 15) + 3, (size_t(1) << 20) + 37};

TEST(CastCpu, RoundNearestMatchesElementRule) {
  for (size_t n : kLengths) {
    const std::vector<float> x = random_floats(n, n + 1);
    std::vector<bf16> y(n);
    cpu::cast_f32_to_bf16_rn(x.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(y[i].bits, float_to_bf16_rn(x[i]).bits) << "n " << n << " i " << i;
    }
  }
}

TEST(CastCpu, WidenMatchesElementRule) {
  for (size_t n : kLengths) {
    std::vector<bf16> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = bf16{uint16_t(i * 40503u)};
    std::vector<float> y(n);
    cpu::cast_bf16_to_f32(x.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(float_as_bits(y[i]), uint32_t(x[i].bits) << 16) << "n " << n << " i " << i;
    }
  }
}

// On every ISA the CPU runs (kernels/cpu/cpu_isa.h).
TEST(CastCpu, StochasticMatchesContract) {
  const uint64_t bases[] = {0, 3, 8, 61, 1000003, (uint64_t(1) << 35) - 5};
  for (cpu::CpuIsa isa : cpu::runnable_cpu_isas()) {
    const cpu::ScopedCpuIsa forced(isa);
    SCOPED_TRACE(cpu::cpu_isa_name(isa));
    for (size_t n : kLengths) {
      for (uint64_t base : bases) {
        const std::vector<float> x = random_floats(n, n + 2);
        std::vector<bf16> y(n);
        cpu::cast_f32_to_bf16_sr(x.data(), y.data(), n, 2024, kPurpose, 17, base);
        for (size_t i = 0; i < n; ++i) {
          const uint32_t r = sr_bits16(2024, kPurpose, 17, base + i);
          ASSERT_EQ(y[i].bits, float_to_bf16_sr(x[i], r).bits)
              << "n " << n << " base " << base << " i " << i;
        }
      }
    }
  }
}

// Runs f under 1 and then 2 OpenMP threads and restores the previous setting.
template <typename F>
void with_threads(int threads, F&& f) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  f();
  omp_set_num_threads(before);
}

TEST(CastCpu, OneAndTwoThreadsBitIdentical) {
  const size_t n = (size_t(1) << 21) + 45;
  const std::vector<float> x = random_floats(n, 5);
  std::vector<bf16> rn1(n), rn2(n), sr1(n), sr2(n);
  std::vector<float> w1(n), w2(n);
  auto run = [&](std::vector<bf16>& rn, std::vector<bf16>& sr, std::vector<float>& w) {
    cpu::cast_f32_to_bf16_rn(x.data(), rn.data(), n);
    cpu::cast_f32_to_bf16_sr(x.data(), sr.data(), n, 11, kPurpose, 3, 5);
    cpu::cast_bf16_to_f32(sr.data(), w.data(), n);
  };
  with_threads(1, [&] { run(rn1, sr1, w1); });
  with_threads(2, [&] {
    ASSERT_EQ(omp_get_max_threads(), 2);
    run(rn2, sr2, w2);
  });
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(rn1[i].bits, rn2[i].bits) << i;
    ASSERT_EQ(sr1[i].bits, sr2[i].bits) << i;
    ASSERT_EQ(float_as_bits(w1[i]), float_as_bits(w2[i])) << i;
  }
}

// A shard cast with its global offset as base_index gives the same bits as the
// whole array: any cut point, aligned to the Philox groups or not.
TEST(CastCpu, StochasticSplitInvariant) {
  const size_t n = (size_t(1) << 17) + 29;
  const uint64_t base = 77;
  const std::vector<float> x = random_floats(n, 6);
  std::vector<bf16> whole(n);
  cpu::cast_f32_to_bf16_sr(x.data(), whole.data(), n, 3, kPurpose, 9, base);
  const size_t cuts[] = {1, 3, 7, 8, 63, 64, 65, 1000, n / 2 + 3, n - 1};
  for (size_t cut : cuts) {
    std::vector<bf16> parts(n);
    cpu::cast_f32_to_bf16_sr(x.data(), parts.data(), cut, 3, kPurpose, 9, base);
    cpu::cast_f32_to_bf16_sr(x.data() + cut, parts.data() + cut, n - cut, 3, kPurpose, 9,
                             base + cut);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(parts[i].bits, whole[i].bits) << "cut " << cut;
  }
  // Many small shards (uneven sizes) likewise.
  std::vector<bf16> shards(n);
  for (size_t lo = 0, len = 1; lo < n; lo += len, len = len * 3 + 1) {
    const size_t m = std::min(len, n - lo);
    cpu::cast_f32_to_bf16_sr(x.data() + lo, shards.data() + lo, m, 3, kPurpose, 9, base + lo);
  }
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(shards[i].bits, whole[i].bits) << i;
}

// Different steps draw different bits: the same input rounds differently.
TEST(CastCpu, StepChangesTheDraw) {
  const size_t n = 4096;
  const std::vector<float> x(n, 1.00390625f + 1e-4f);  // inexact in bf16
  std::vector<bf16> a(n), b(n);
  cpu::cast_f32_to_bf16_sr(x.data(), a.data(), n, 1, kPurpose, 0, 0);
  cpu::cast_f32_to_bf16_sr(x.data(), b.data(), n, 1, kPurpose, 1, 0);
  size_t differ = 0;
  for (size_t i = 0; i < n; ++i) differ += a[i].bits != b[i].bits;
  EXPECT_GT(differ, n / 4);
}

}  // namespace
}  // namespace srkit
