#include "kernels/cpu/gemm_bf16_dot.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/avx512_lanes.h"
#include "kernels/cpu/isa_target.h"

namespace srkit::cpu::bf16_dot {
namespace {

// Register block: kRows rows x kCols columns of fp32 sums, 2 x 12 zmm
// accumulators, 2 for the B pairs and one broadcast A pair: 27 of 32 registers.
constexpr int kRows = 12;
constexpr int kCols = 32;
// Pairs of k per pass over the tile: the B block of a pass (32 x 512 bf16,
// 32 KiB) stays in L1 while every row block of the tile streams past it, and
// the sums go to the fp32 tile and come back between passes (exact, so the
// chain per element is unchanged).
constexpr int kPassPairs = 256;

int pairs(int K) { return (K + 1) / 2; }

SRKIT_AVX512_WARNINGS_BEGIN

// The lowest n of 16 lanes (none for n <= 0, all for n >= 16).
SRKIT_TARGET_AVX512_BF16 inline __mmask16 lanes(int n) {
  if (n <= 0) return __mmask16(0);
  return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
}

// r[j] = column j of the 16 x 16 matrix of 32-bit words whose rows are r[0..15]:
// pairs of rows interleaved by 32 then 64 bits (within each 128-bit lane),
// then the 4 x 4 matrix of 128-bit lanes transposed by two rounds of shuffles.
SRKIT_TARGET_AVX512_BF16 inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int j = 0; j < 8; ++j) {
    t[2 * j] = _mm512_unpacklo_epi32(r[2 * j], r[2 * j + 1]);
    t[2 * j + 1] = _mm512_unpackhi_epi32(r[2 * j], r[2 * j + 1]);
  }
  // u[4g + c], lane L: rows 4g .. 4g + 3 of column 4L + c.
  for (int g = 0; g < 4; ++g) {
    u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  // Column 4L + c is lane L of u[c], u[4 + c], u[8 + c], u[12 + c].
  for (int c = 0; c < 4; ++c) {
    const __m512i in[4] = {u[c], u[4 + c], u[8 + c], u[12 + c]};
    __m512i out[4];
    transpose_lanes4(in, out);
    for (int q = 0; q < 4; ++q) r[4 * q + c] = out[q];
  }
}

// Vectors [0, w) of a block, each contiguous along k (element k of vector i at
// src[i * ld + k]), as [pair][w] words: a pair of k is one 32-bit word of the
// source, so this is a transpose of words, 16 x 16 at a time.
SRKIT_TARGET_AVX512_BF16 void pack_k_contiguous(const bf16* src, size_t ld, int w, int K,
                                                uint32_t* d) {
  const int full = K / 2;  // pairs with both halves in range
  for (int i0 = 0; i0 < w; i0 += 16) {
    const int rows = std::min(16, w - i0);
    for (int kp0 = 0; kp0 < full; kp0 += 16) {
      const int cols = std::min(16, full - kp0);
      __m512i r[16];
      for (int i = 0; i < 16; ++i) {
        r[i] = i < rows ? _mm512_maskz_loadu_epi32(lanes(cols), &src[size_t(i0 + i) * ld + 2 * kp0])
                        : _mm512_setzero_si512();
      }
      transpose16(r);
      for (int c = 0; c < cols; ++c) {
        _mm512_mask_storeu_epi32(d + size_t(kp0 + c) * w + i0, lanes(rows), r[c]);
      }
    }
    if (K % 2 != 0) {  // the last pair: element K - 1 and a zero
      for (int i = 0; i < rows; ++i)
        d[size_t(full) * w + i0 + i] = src[size_t(i0 + i) * ld + K - 1].bits;
    }
  }
}

// Vectors [0, w) of a block laid across k (element k of vector i at
// src[k * ld + i]): each word joins two source rows' elements, 16 at a time.
SRKIT_TARGET_AVX512_BF16 void pack_k_strided(const bf16* src, size_t ld, int w, int K,
                                             uint32_t* d) {
  const int pair_count = (K + 1) / 2;
  for (int kp = 0; kp < pair_count; ++kp) {
    const bf16* s0 = src + size_t(2 * kp) * ld;
    const bool has_odd = 2 * kp + 1 < K;
    const bf16* s1 = has_odd ? s0 + ld : s0;  // not read without has_odd
    for (int i0 = 0; i0 < w; i0 += 16) {
      const __mmask16 m = lanes(w - i0);
      const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, s0 + i0));
      const __m512i hi = has_odd ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, s1 + i0))
                                 : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(d + size_t(kp) * w + i0, m,
                               _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
  }
}

// Words of n vectors along k in blocks of `width` vectors: block j holds vectors
// [width j, width j + w) as [pair][w] words. Element (i, k) is src[i * ld + k]
// when k_contiguous, else src[k * ld + i].
void pack(const bf16* src, size_t ld, bool k_contiguous, int n, int K, int width, uint32_t* dst) {
  const size_t kp_count = size_t(K + 1) / 2;
  for (int i0 = 0; i0 < n; i0 += width) {
    const int w = std::min(width, n - i0);
    uint32_t* d = dst + size_t(i0) * kp_count;
    if (k_contiguous) {
      pack_k_contiguous(src + size_t(i0) * ld, ld, w, K, d);
    } else {
      pack_k_strided(src + i0, ld, w, K, d);
    }
  }
}

// Sums of R rows x (up to) 32 columns over pairs [0, n) of one pass: pa holds
// the rows' pairs as [pair][R], pb the columns' as [pair][w]. first: start at
// zero, else continue the sums stored in c.
template <int R, bool kTwoVectors>
SRKIT_TARGET_AVX512_BF16 void block(const uint32_t* pa, const uint32_t* pb, int w, int n,
                                    bool first, float* c, size_t ldc) {
  const __mmask16 m0 = lanes(w), m1 = lanes(w - 16);
  // Every loop over r fully unrolled: with constant indices the arrays live
  // in registers. (A loop left rolled makes GCC keep them in memory too and
  // store every accumulator on every step of k: 30% of the time.)
  __m512 s0[R], s1[R];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    s0[r] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, c + size_t(r) * ldc);
    if (kTwoVectors) {
      s1[r] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, c + size_t(r) * ldc + 16);
    }
  }
  for (int kp = 0; kp < n; ++kp) {
    const __m512i b0 = _mm512_maskz_loadu_epi32(m0, pb + size_t(kp) * w);
    __m512i b1;
    if (kTwoVectors) b1 = _mm512_maskz_loadu_epi32(m1, pb + size_t(kp) * w + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512i a = _mm512_set1_epi32(int(pa[size_t(kp) * R + r]));
      s0[r] = _mm512_dpbf16_ps(s0[r], (__m512bh)a, (__m512bh)b0);
      if (kTwoVectors) s1[r] = _mm512_dpbf16_ps(s1[r], (__m512bh)a, (__m512bh)b1);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(c + size_t(r) * ldc, m0, s0[r]);
    if (kTwoVectors) _mm512_mask_storeu_ps(c + size_t(r) * ldc + 16, m1, s1[r]);
  }
}

using BlockFn = void (*)(const uint32_t*, const uint32_t*, int, int, bool, float*, size_t);

template <int R>
constexpr BlockFn block_for(bool two) {
  return two ? &block<R, true> : &block<R, false>;
}

BlockFn block_fn(int rows, bool two) {
  constexpr BlockFn kOne[kRows] = {
      block_for<1>(false), block_for<2>(false),  block_for<3>(false),  block_for<4>(false),
      block_for<5>(false), block_for<6>(false),  block_for<7>(false),  block_for<8>(false),
      block_for<9>(false), block_for<10>(false), block_for<11>(false), block_for<12>(false)};
  constexpr BlockFn kTwo[kRows] = {block_for<1>(true),  block_for<2>(true),  block_for<3>(true),
                                   block_for<4>(true),  block_for<5>(true),  block_for<6>(true),
                                   block_for<7>(true),  block_for<8>(true),  block_for<9>(true),
                                   block_for<10>(true), block_for<11>(true), block_for<12>(true)};
  return two ? kTwo[rows - 1] : kOne[rows - 1];
}

SRKIT_AVX512_WARNINGS_END

float flush_subnormal(float x) { return std::fabs(x) < 0x1p-126f ? std::copysign(0.0f, x) : x; }

}  // namespace

bool cpu_supported() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}

size_t packed_words(int rows_or_cols, int K) { return size_t(rows_or_cols) * size_t(pairs(K)); }

void pack_a(const bf16* a, size_t lda, bool trans, int rows, int K, uint32_t* dst) {
  pack(a, lda, /*k_contiguous=*/!trans, rows, K, kRows, dst);
}

void pack_b(const bf16* b, size_t ldb, bool trans, int cols, int K, uint32_t* dst) {
  pack(b, ldb, /*k_contiguous=*/trans, cols, K, kCols, dst);
}

void tile_product(const uint32_t* packed_a, const uint32_t* packed_b, int rows, int cols, int K,
                  float* acc, size_t ldacc) {
  const int kp_count = pairs(K);
  if (kp_count == 0) {
    for (int r = 0; r < rows; ++r) std::fill_n(acc + size_t(r) * ldacc, cols, 0.0f);
    return;
  }
  for (int p0 = 0; p0 < kp_count; p0 += kPassPairs) {
    const int n = std::min(kPassPairs, kp_count - p0);
    for (int c0 = 0; c0 < cols; c0 += kCols) {
      const int w = std::min(kCols, cols - c0);
      const uint32_t* pb = packed_b + size_t(c0) * size_t(kp_count) + size_t(p0) * size_t(w);
      for (int r0 = 0; r0 < rows; r0 += kRows) {
        const int h = std::min(kRows, rows - r0);
        const uint32_t* pa = packed_a + size_t(r0) * size_t(kp_count) + size_t(p0) * size_t(h);
        block_fn(h, w > 16)(pa, pb, w, n, p0 == 0, acc + size_t(r0) * ldacc + c0, ldacc);
      }
    }
  }
}

float dot_pair_reference(float c, bf16 a0, bf16 a1, bf16 b0, bf16 b1) {
  auto in = [](bf16 x) { return flush_subnormal(bf16_to_float(x)); };
  c = flush_subnormal(c);
  c = flush_subnormal(c + flush_subnormal(in(a1)*in(b1)));
  return flush_subnormal(c + flush_subnormal(in(a0)*in(b0)));
}

}  // namespace srkit::cpu::bf16_dot
