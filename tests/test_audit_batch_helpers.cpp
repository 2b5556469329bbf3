// The helpers behind sr-audit cast's batched statistics: the byte histograms
// (lib/audit/byte_histogram.h) against plain counting, the exact inverse of a
// power of two, and Input::make's masked 1/|x|.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "lib/audit/byte_histogram.h"
#include "lib/audit/rounding_stats.h"

namespace srkit::audit {
namespace {

// Random keys over more values than are counted (so some are ignored), 0xff
// padding at the end, and 0/1 weights; every count equals a plain loop's.
TEST(ByteHistogram, CountsEqualPlainCounting) {
  std::mt19937 rng(7);
  for (int values : {1, 16, 41, 255}) {
    for (size_t n : {size_t(0), size_t(1), size_t(31), size_t(200), kByteHistogramBlock}) {
      std::vector<uint8_t> keys(kByteHistogramBlock, 0xff), weights(kByteHistogramBlock, 0);
      for (size_t i = 0; i < n; ++i) {
        keys[i] = uint8_t(rng() % uint32_t(values + 8));  // some >= values
        weights[i] = uint8_t(rng() & 1u);
      }
      if (n > 3) keys[0] = keys[1] = keys[2] = 0;  // runs of one key
      std::vector<uint32_t> counts(size_t(values), 5), weighted(size_t(values), 5);
      add_byte_histogram(keys.data(), values, counts.data());
      add_weighted_byte_histogram(keys.data(), weights.data(), values, weighted.data());
      for (int k = 0; k < values; ++k) {
        uint32_t expect = 5, expect_weighted = 5;  // the counts are added to
        for (size_t i = 0; i < kByteHistogramBlock; ++i) {
          expect += keys[i] == k;
          expect_weighted += keys[i] == k && weights[i];
        }
        SCOPED_TRACE("values=" + std::to_string(values) + " n=" + std::to_string(n));
        EXPECT_EQ(counts[size_t(k)], expect) << "value " << k;
        EXPECT_EQ(weighted[size_t(k)], expect_weighted) << "value " << k;
      }
    }
  }
}

// Every key in every lane at once: the byte accumulators' worst case (one
// value in all 256 bytes).
TEST(ByteHistogram, OneValueEverywhere) {
  std::vector<uint8_t> keys(kByteHistogramBlock, 3), weights(kByteHistogramBlock, 1);
  uint32_t counts[4] = {}, weighted[4] = {};
  add_byte_histogram(keys.data(), 4, counts);
  add_weighted_byte_histogram(keys.data(), weights.data(), 4, weighted);
  EXPECT_EQ(counts[3], kByteHistogramBlock);
  EXPECT_EQ(weighted[3], kByteHistogramBlock);
  EXPECT_EQ(counts[0] + counts[1] + counts[2], 0u);
}

TEST(InverseOfPowerOfTwo, ExactForEveryExponentOfTheRange) {
  for (int k = -1022; k <= 1022; ++k) {
    const double p = std::ldexp(1.0, k);
    EXPECT_EQ(inverse_of_power_of_two(p), 1 / p) << "2^" << k;
    EXPECT_EQ(inverse_of_power_of_two(p), std::ldexp(1.0, -k)) << "2^" << k;
  }
}

TEST(RoundingStatsInput, InverseMagnitudeIsZeroAtZeroOnly) {
  using Input = RoundingStats::Input;
  EXPECT_EQ(Input::make(0.0, 0.0, 0x1p-133).inv_abs_x, 0.0);
  EXPECT_EQ(Input::make(-0.0, 0.0, 0x1p-133).inv_abs_x, 0.0);
  EXPECT_EQ(Input::make(-4.0, 0.5, 0x1p-5).inv_abs_x, 0.25);
  const double tiny = double(std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(Input::make(tiny, 0.5, 0x1p-133).inv_abs_x, 1 / tiny);
  EXPECT_EQ(Input::make(3.0, 0.5, 0x1p-6).inv_ulp, 64.0);
}

}  // namespace
}  // namespace srkit::audit
