#include "kernels/cpu/cast.h"

#include <algorithm>

#include "kernels/common/philox.h"
#include "kernels/common/sr_bits.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace srkit::cpu {
namespace {

// Below this many elements one thread is faster than waking a team.
constexpr size_t kParallelMin = size_t(1) << 15;

// Casts stream in blocks of 64 elements (one SR batch). Each block prefetches
// the input, and the output with intent to write, kPrefetchBytes of input
// ahead: with the hardware prefetcher alone a 2-thread fp32 -> bf16 cast of
// 256 MB ran at ~65% of memcpy, with this at ~90%.
constexpr size_t kBlock = 64;
constexpr size_t kPrefetchBytes = 2048;
constexpr size_t kCacheLine = 64;

// kRw: 0 to read, 1 to write (__builtin_prefetch wants a constant).
template <int kRw, typename T>
inline void prefetch_block(const T* p) {
  const char* c = reinterpret_cast<const char*>(p);
  for (size_t line = 0; line < kBlock * sizeof(T); line += kCacheLine) {
    __builtin_prefetch(c + line, kRw);
  }
}

// Runs block(i0) for i0 = begin, begin + 64, ... while a whole block fits in
// n, spread over the OpenMP threads in contiguous ranges; returns where the
// remaining (< 64) elements start.
template <typename In, typename Out, typename Block>
size_t for_each_block(const In* in, Out* out, size_t begin, size_t n, Block&& block) {
  const size_t blocks = (n - begin) / kBlock;
  const size_t ahead = kPrefetchBytes / sizeof(In);
#pragma omp parallel for schedule(static) if (blocks * kBlock >= kParallelMin)
  for (size_t b = 0; b < blocks; ++b) {
    const size_t i0 = begin + b * kBlock;
    if (i0 + ahead + kBlock <= n) {
      prefetch_block<0>(in + i0 + ahead);
      prefetch_block<1>(out + i0 + ahead);
    }
    block(i0);
  }
  return begin + blocks * kBlock;
}

constexpr size_t kBlocks = kSrBitsBatch / kSrElementsPerPhilox;  // 8 Philox blocks
static_assert(kSrBitsBatch == kBlock, "an SR batch is one streaming block");
constexpr int kRounds = 10;

// (seed, purpose, step) as the high counter words and the key of every round,
// computed once per array rather than once per batch.
struct SrStream {
  uint32_t sub_lo, sub_hi;
  uint32_t key0[kRounds], key1[kRounds];
};

SrStream sr_stream(uint64_t seed, RngPurpose purpose, uint64_t step) {
  const uint64_t sub = sr_subsequence(purpose, step);
  SrStream s{uint32_t(sub), uint32_t(sub >> 32), {}, {}};
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < kRounds; ++r) {
    s.key0[r] = k0;
    s.key1[r] = k1;
    k0 += philox_detail::kW0;
    k1 += philox_detail::kW1;
  }
  return s;
}

// Portable form: the 8 blocks as arrays of 8 lanes (structure of arrays). The
// rounds are those of philox4x32_10 (kernels/common/philox.h); keeping the round
// loop rolled lets GCC vectorize the lane loop instead of unrolling it flat.
void sr_lanes_portable(const SrStream& s, uint64_t group0, uint16_t* bits) {
  using namespace philox_detail;
  uint32_t c0[kBlocks], c1[kBlocks], c2[kBlocks], c3[kBlocks];
  for (size_t j = 0; j < kBlocks; ++j) {
    const uint64_t g = group0 + j;
    c0[j] = uint32_t(g);
    c1[j] = uint32_t(g >> 32);
    c2[j] = s.sub_lo;
    c3[j] = s.sub_hi;
  }
#pragma GCC unroll 1
  for (int round = 0; round < kRounds; ++round) {
    const uint32_t k0 = s.key0[round], k1 = s.key1[round];
#pragma omp simd
    for (size_t j = 0; j < kBlocks; ++j) {
      const uint64_t p0 = uint64_t(kM0) * c0[j];
      const uint64_t p1 = uint64_t(kM1) * c2[j];
      const uint32_t n0 = uint32_t(p1 >> 32) ^ c1[j] ^ k0;
      const uint32_t n2 = uint32_t(p0 >> 32) ^ c3[j] ^ k1;
      c0[j] = n0;
      c1[j] = uint32_t(p1);
      c2[j] = n2;
      c3[j] = uint32_t(p0);
    }
  }
  // Lane k of block j: word k/2, low half for even k (sr_lane).
  for (size_t j = 0; j < kBlocks; ++j) {
    uint16_t* b = bits + j * kSrElementsPerPhilox;
    const uint32_t w[4] = {c0[j], c1[j], c2[j], c3[j]};
    for (int k = 0; k < 4; ++k) {
      b[2 * k] = uint16_t(w[k]);
      b[2 * k + 1] = uint16_t(w[k] >> 16);
    }
  }
}

#if defined(__AVX2__)
// AVX2 form, ~3x the portable one. Each 64-bit slot of a vector holds one
// block's 32-bit word in its low half; vpmuludq reads only low halves, so the
// products need no masking and the high halves may carry junk (never read).
// vpshufd (0xF5) brings a product's high half down on the shuffle port,
// leaving the multiply/shift ports to vpmuludq. Two sets of 4 blocks in
// flight hide the multiply latency; more sets spill registers.
struct Blocks4 {
  __m256i w[4];
};

inline Blocks4 blocks4_init(const SrStream& s, uint64_t group0) {
  const __m256i g =
      _mm256_add_epi64(_mm256_set1_epi64x(int64_t(group0)), _mm256_setr_epi64x(0, 1, 2, 3));
  return Blocks4{{g, _mm256_srli_epi64(g, 32), _mm256_set1_epi32(int(s.sub_lo)),
                  _mm256_set1_epi32(int(s.sub_hi))}};
}

inline void round4(Blocks4& b, __m256i k0, __m256i k1) {
  using namespace philox_detail;
  const __m256i p0 = _mm256_mul_epu32(b.w[0], _mm256_set1_epi64x(kM0));
  const __m256i p1 = _mm256_mul_epu32(b.w[2], _mm256_set1_epi64x(kM1));
  // (c ^ k) does not wait for the product: one xor on the critical path.
  b.w[0] = _mm256_xor_si256(_mm256_shuffle_epi32(p1, 0xF5), _mm256_xor_si256(b.w[1], k0));
  b.w[2] = _mm256_xor_si256(_mm256_shuffle_epi32(p0, 0xF5), _mm256_xor_si256(b.w[3], k1));
  b.w[1] = p1;
  b.w[3] = p0;
}

// Words (w0..w3) of 4 blocks -> their 32 lanes in element order (a block's
// 128 bits, little-endian, are its lanes 0..7).
inline void store4(const Blocks4& b, uint16_t* out) {
  const __m256i lo01 = _mm256_unpacklo_epi32(b.w[0], b.w[1]);  // blk0: w0 w1 | blk2: w0 w1
  const __m256i hi01 = _mm256_unpackhi_epi32(b.w[0], b.w[1]);  // blk1 | blk3
  const __m256i lo23 = _mm256_unpacklo_epi32(b.w[2], b.w[3]);
  const __m256i hi23 = _mm256_unpackhi_epi32(b.w[2], b.w[3]);
  const __m256i even = _mm256_unpacklo_epi64(lo01, lo23);  // blk0 | blk2
  const __m256i odd = _mm256_unpacklo_epi64(hi01, hi23);   // blk1 | blk3
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute2x128_si256(even, odd, 0x20));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16),
                      _mm256_permute2x128_si256(even, odd, 0x31));
}

inline void sr_lanes(const SrStream& s, uint64_t group0, uint16_t* bits) {
  Blocks4 a = blocks4_init(s, group0), b = blocks4_init(s, group0 + 4);
  for (int round = 0; round < kRounds; ++round) {
    const __m256i k0 = _mm256_set1_epi32(int(s.key0[round]));
    const __m256i k1 = _mm256_set1_epi32(int(s.key1[round]));
    round4(a, k0, k1);
    round4(b, k0, k1);
  }
  store4(a, bits);
  store4(b, bits + 32);
}
#else
inline void sr_lanes(const SrStream& s, uint64_t group0, uint16_t* bits) {
  sr_lanes_portable(s, group0, bits);
}
#endif

// SR of one batch. Batches of finite inputs (all but a vanishing few) take
// float_to_bf16_sr's finite branch, (bits + r) >> 16, without the per-element
// NaN/Inf selects; any special sends the batch through the full rule.
inline void sr_batch(const float* x, bf16* y, const uint16_t* r) {
  uint32_t max_magnitude = 0;
#pragma omp simd reduction(max : max_magnitude)
  for (size_t e = 0; e < kSrBitsBatch; ++e) {
    max_magnitude = std::max(max_magnitude, float_as_bits(x[e]) & 0x7fffffffu);
  }
  if (max_magnitude < 0x7f800000u) {
#pragma omp simd
    for (size_t e = 0; e < kSrBitsBatch; ++e) {
      y[e] = bf16{uint16_t((float_as_bits(x[e]) + r[e]) >> 16)};
    }
  } else {
#pragma omp simd
    for (size_t e = 0; e < kSrBitsBatch; ++e) y[e] = float_to_bf16_sr(x[e], r[e]);
  }
}

}  // namespace

void sr_bits16_x64(uint64_t seed, RngPurpose purpose, uint64_t step, uint64_t group0,
                   uint16_t* bits) {
  sr_lanes(sr_stream(seed, purpose, step), group0, bits);
}

namespace detail {
void sr_bits16_x64_portable(uint64_t seed, RngPurpose purpose, uint64_t step, uint64_t group0,
                            uint16_t* bits) {
  sr_lanes_portable(sr_stream(seed, purpose, step), group0, bits);
}
}  // namespace detail

void cast_f32_to_bf16_rn(const float* in, bf16* out, size_t n) {
  const size_t tail = for_each_block(in, out, 0, n, [=](size_t i0) {
#pragma omp simd
    for (size_t e = i0; e < i0 + kBlock; ++e) out[e] = float_to_bf16_rn(in[e]);
  });
  for (size_t i = tail; i < n; ++i) out[i] = float_to_bf16_rn(in[i]);
}

void cast_bf16_to_f32(const bf16* in, float* out, size_t n) {
  const size_t tail = for_each_block(in, out, 0, n, [=](size_t i0) {
#pragma omp simd
    for (size_t e = i0; e < i0 + kBlock; ++e) out[e] = bf16_to_float(in[e]);
  });
  for (size_t i = tail; i < n; ++i) out[i] = bf16_to_float(in[i]);
}

void cast_f32_to_bf16_sr(const float* in, bf16* out, size_t n, uint64_t seed, RngPurpose purpose,
                         uint64_t step, uint64_t base_index) {
  check_sr_step("cast_f32_to_bf16_sr", step);
  // Elements before the first global index that starts a Philox group, then
  // whole batches of 64 (8 groups), then the rest: each element's bits are
  // sr_bits16(seed, purpose, step, base_index + i) however the array is cut.
  const size_t head = std::min<size_t>(
      n, (kSrElementsPerPhilox - base_index % kSrElementsPerPhilox) % kSrElementsPerPhilox);
  for (size_t i = 0; i < head; ++i) {
    out[i] = float_to_bf16_sr(in[i], sr_bits16(seed, purpose, step, base_index + i));
  }
  const SrStream s = sr_stream(seed, purpose, step);
  const uint64_t group_head = (base_index + head) / kSrElementsPerPhilox;
  const size_t tail = for_each_block(in, out, head, n, [&](size_t i0) {
    alignas(32) uint16_t bits[kSrBitsBatch];
    sr_lanes(s, group_head + (i0 - head) / kSrElementsPerPhilox, bits);
    sr_batch(in + i0, out + i0, bits);
  });
  for (size_t i = tail; i < n; ++i) {
    out[i] = float_to_bf16_sr(in[i], sr_bits16(seed, purpose, step, base_index + i));
  }
}

}  // namespace srkit::cpu
