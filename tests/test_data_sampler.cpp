// BatchSampler (random windows, a pure function of seed, batch, sample) and
// EvalWindows (fixed, in order).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/common/sr_bits.h"
#include "lib/data/data_rng.h"
#include "lib/data/sampler.h"

using namespace srkit;
using ::testing::HasSubstr;

namespace {

// tokens[i] = i mod 65536, so a window's tokens reveal its start.
TokenData ramp(size_t n) {
  TokenData d;
  d.tokens.resize(n);
  for (size_t i = 0; i < n; ++i) d.tokens[i] = uint16_t(i);
  d.vocab_size = 65536;
  d.source = "ramp";
  return d;
}

struct Batch {
  std::vector<int32_t> in, tgt;
  Batch(int rows, int T) : in(size_t(rows) * T), tgt(size_t(rows) * T) {}
};

}  // namespace

TEST(BatchSampler, WindowsAreContiguousAndTargetsShiftByOne) {
  const TokenData data = ramp(5000);
  const int T = 16, B = 8;
  const BatchSampler sampler(data, T, 1234);
  Batch b(B, T);
  sampler.fill(3, 0, B, b.in.data(), b.tgt.data());
  for (int r = 0; r < B; ++r) {
    const uint64_t start = sampler.window_start(3, uint64_t(r));
    for (int t = 0; t < T; ++t) {
      ASSERT_EQ(b.in[size_t(r) * T + t], int32_t(start + t));
      ASSERT_EQ(b.tgt[size_t(r) * T + t], int32_t(start + t + 1));
    }
  }
}

TEST(BatchSampler, KnownAnswerFromThePhiloxContract) {
  // The start is uniform_below(64 bits of sr_block(seed, data purpose, batch, sample), n - T):
  // pinning it keeps resumed runs and other ranks on the same windows across releases.
  const TokenData data = ramp(1000);
  const BatchSampler sampler(data, 10, 42);
  const Philox4 block = sr_block(42, RngPurpose::kDataWindows, 5, 7);
  const uint64_t bits = uint64_t(block.v[0]) | (uint64_t(block.v[1]) << 32);
  const uint64_t expected = uint64_t((static_cast<unsigned __int128>(bits) * 990u) >> 64);
  EXPECT_EQ(sampler.window_start(5, 7), expected);
  EXPECT_EQ(sampler.num_starts(), 990u);
}

TEST(BatchSampler, DeterministicAndSeedDependent) {
  const TokenData data = ramp(100000);
  const int T = 8, B = 16;
  Batch a(B, T), b(B, T), c(B, T);
  BatchSampler(data, T, 7).fill(11, 0, B, a.in.data(), a.tgt.data());
  BatchSampler(data, T, 7).fill(11, 0, B, b.in.data(), b.tgt.data());
  BatchSampler(data, T, 8).fill(11, 0, B, c.in.data(), c.tgt.data());
  EXPECT_EQ(a.in, b.in);
  EXPECT_EQ(a.tgt, b.tgt);
  EXPECT_NE(a.in, c.in);
  Batch d(B, T);
  BatchSampler(data, T, 7).fill(12, 0, B, d.in.data(), d.tgt.data());
  EXPECT_NE(a.in, d.in);  // the next batch differs
}

TEST(BatchSampler, PureFunctionOfBatchAndSample) {
  // A global batch of 12 filled at once equals the same batch split over
  // "ranks" of 5, 4 and 3 samples.
  const TokenData data = ramp(20000);
  const int T = 12, B = 12;
  const BatchSampler sampler(data, T, 99);
  Batch whole(B, T), parts(B, T);
  sampler.fill(1000, 0, B, whole.in.data(), whole.tgt.data());
  sampler.fill(1000, 0, 5, parts.in.data(), parts.tgt.data());
  sampler.fill(1000, 5, 4, parts.in.data() + 5 * T, parts.tgt.data() + 5 * T);
  sampler.fill(1000, 9, 3, parts.in.data() + 9 * T, parts.tgt.data() + 9 * T);
  EXPECT_EQ(whole.in, parts.in);
  EXPECT_EQ(whole.tgt, parts.tgt);
}

TEST(BatchSampler, StartsCoverTheWholeRangeUniformly) {
  // n - T = 20 possible starts; 20000 draws, 1000 expected each. Chi-square with
  // 19 degrees of freedom: the 0.999 quantile is 43.8 (fixed seed, so not flaky).
  const TokenData data = ramp(52);
  const int T = 32;
  const BatchSampler sampler(data, T, 5);
  ASSERT_EQ(sampler.num_starts(), 20u);
  std::vector<int> counts(20, 0);
  for (uint64_t batch = 0; batch < 1000; ++batch) {
    for (uint64_t s = 0; s < 20; ++s) {
      const uint64_t start = sampler.window_start(batch, s);
      ASSERT_LE(start + T, data.tokens.size() - 1);  // the last target exists
      ++counts[start];
    }
  }
  double chi2 = 0;
  for (int c : counts) chi2 += (c - 1000.0) * (c - 1000.0) / 1000.0;
  EXPECT_LT(chi2, 43.8);
  EXPECT_GT(counts.front(), 0);  // both ends of [0, n - T - 1] are reachable
  EXPECT_GT(counts.back(), 0);
}

TEST(BatchSampler, ShortestStreamHasOneWindow) {
  const TokenData data = ramp(9);
  const BatchSampler sampler(data, 8, 3);
  Batch b(2, 8);
  sampler.fill(0, 0, 2, b.in.data(), b.tgt.data());
  EXPECT_EQ(b.in[0], 0);
  EXPECT_EQ(b.tgt[7], 8);
  EXPECT_EQ(b.in[8], 0);
}

TEST(BatchSampler, TooShortStreamNamesTheData) {
  const TokenData data = ramp(8);
  try {
    BatchSampler sampler(data, 8, 3);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "data file ramp has 8 tokens; need at least 8+1");
  }
  EXPECT_THROW(BatchSampler(data, 0, 3), std::invalid_argument);
}

TEST(EvalWindows, FixedNonOverlappingInOrder) {
  const TokenData data = ramp(35);
  const int T = 8;
  const EvalWindows ev(data, T);
  ASSERT_EQ(ev.count(), 4u);  // (35 - 1) / 8; tokens 33, 34 only as remainder
  Batch all(4, T);
  ev.fill(0, 4, all.in.data(), all.tgt.data());
  for (int w = 0; w < 4; ++w) {
    for (int t = 0; t < T; ++t) {
      ASSERT_EQ(all.in[size_t(w) * T + t], w * T + t);
      ASSERT_EQ(all.tgt[size_t(w) * T + t], w * T + t + 1);
    }
  }
  Batch tail(2, T);
  ev.fill(2, 2, tail.in.data(), tail.tgt.data());
  EXPECT_TRUE(std::equal(tail.in.begin(), tail.in.end(), all.in.begin() + 2 * T));
  Batch again(4, T);
  ev.fill(0, 4, again.in.data(), again.tgt.data());
  EXPECT_EQ(again.in, all.in);
}

TEST(EvalWindows, ExactFitAndErrors) {
  const TokenData exact = ramp(33);  // 4 windows use every token
  const EvalWindows ev(exact, 8);
  EXPECT_EQ(ev.count(), 4u);
  Batch b(1, 8);
  ev.fill(3, 1, b.in.data(), b.tgt.data());
  EXPECT_EQ(b.tgt.back(), 32);
  EXPECT_THROW(ev.fill(4, 1, b.in.data(), b.tgt.data()), std::out_of_range);
  EXPECT_THROW(ev.fill(3, 2, b.in.data(), b.tgt.data()), std::out_of_range);
  EXPECT_THROW(ev.fill(0, -1, b.in.data(), b.tgt.data()), std::out_of_range);
  const TokenData tiny = ramp(4);
  EXPECT_THROW(EvalWindows(tiny, 4), std::invalid_argument);
}

TEST(DataRng, UniformBelowHitsEveryValueAndNothingElse) {
  EXPECT_EQ(uniform_below(0, 7), 0u);
  EXPECT_EQ(uniform_below(~uint64_t(0), 7), 6u);
  EXPECT_EQ(uniform_below(uint64_t(1) << 63, 10), 5u);
  PhiloxStream rng(1, RngPurpose::kSynthetic);
  std::vector<int> seen(3, 0);
  for (int i = 0; i < 3000; ++i) ++seen[rng.below(3)];
  for (int c : seen) EXPECT_NEAR(c, 1000, 120);  // > 5 sigma (sigma = 25.8)
  for (int i = 0; i < 1000; ++i) {
    const int64_t v = rng.range(-2, 2);
    ASSERT_GE(v, -2);
    ASSERT_LE(v, 2);
  }
}
