#include "lib/audit/byte_histogram.h"

#include <immintrin.h>

namespace srkit::audit {
namespace {

// AVX2 (the build's x86-64-v3 baseline): the block is 8 vectors of 32 bytes,
// held in registers; each value costs 8 compares and 8 additions into a byte
// accumulator (at most 8 per lane, no overflow) and one sum of its bytes.
// kWeighted: each compare's 0xff is masked to the input's 0/1 weight.
template <bool kWeighted>
[[gnu::always_inline]] inline void count(const uint8_t* v, const uint8_t* weight, int values,
                                         uint32_t* counts) {
  constexpr int kVectors = int(kByteHistogramBlock / 32);
  __m256i block[kVectors], weights[kVectors];
  for (int j = 0; j < kVectors; ++j) {
    block[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + 32 * j));
    if constexpr (kWeighted) {
      weights[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(weight + 32 * j));
    }
  }
  const __m256i zero = _mm256_setzero_si256();
  for (int k = 0; k < values; ++k) {
    const __m256i key = _mm256_set1_epi8(char(k));
    __m256i hits = zero;  // matches per byte lane
    for (int j = 0; j < kVectors; ++j) {
      const __m256i match = _mm256_cmpeq_epi8(block[j], key);
      if constexpr (kWeighted) {
        hits = _mm256_add_epi8(hits, _mm256_and_si256(match, weights[j]));
      } else {
        hits = _mm256_sub_epi8(hits, match);
      }
    }
    // The 32 lanes summed: four 64-bit partial sums, then two.
    const __m256i sums = _mm256_sad_epu8(hits, zero);
    const __m128i pair =
        _mm_add_epi64(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
    counts[k] += uint32_t(_mm_cvtsi128_si32(pair) + _mm_extract_epi32(pair, 2));
  }
}

}  // namespace

void add_byte_histogram(const uint8_t* v, int values, uint32_t* counts) {
  count<false>(v, nullptr, values, counts);
}

void add_weighted_byte_histogram(const uint8_t* v, const uint8_t* weight, int values,
                                 uint32_t* counts) {
  count<true>(v, weight, values, counts);
}

}  // namespace srkit::audit
