#include "kernels/cpu/gemm_bf16_dot.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

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

// Words of n vectors along k in blocks of `width` vectors: block j holds vectors
// [width j, width j + w) as [pair][w] words. Element (i, k) is src[i * ld + k]
// when k_contiguous, else src[k * ld + i].
void pack(const bf16* src, size_t ld, bool k_contiguous, int n, int K, int width, uint32_t* dst) {
  const int kp_count = pairs(K);
  const bool odd = K % 2 != 0;
  for (int i0 = 0; i0 < n; i0 += width) {
    const int w = std::min(width, n - i0);
    uint32_t* d = dst + size_t(i0) * size_t(kp_count);
    if (k_contiguous) {
      for (int i = 0; i < w; ++i) {
        const uint16_t* s = &src[size_t(i0 + i) * ld].bits;
        for (int kp = 0; kp < K / 2; ++kp) {
          d[size_t(kp) * w + i] = uint32_t(s[2 * kp]) | uint32_t(s[2 * kp + 1]) << 16;
        }
        if (odd) d[size_t(K / 2) * w + i] = s[K - 1];
      }
    } else {
      for (int kp = 0; kp < kp_count; ++kp) {
        const uint16_t* s0 = &src[size_t(2 * kp) * ld + i0].bits;
        const uint16_t* s1 = &src[size_t(2 * kp + 1) * ld + i0].bits;
        uint32_t* o = d + size_t(kp) * w;
        if (odd && kp == kp_count - 1) {
          for (int i = 0; i < w; ++i) o[i] = s0[i];
        } else {
          for (int i = 0; i < w; ++i) o[i] = uint32_t(s0[i]) | uint32_t(s1[i]) << 16;
        }
      }
    }
  }
}

#define SRKIT_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// Sums of R rows x (up to) 32 columns over pairs [0, n) of one pass: pa holds
// the rows' pairs as [pair][R], pb the columns' as [pair][w]. first: start at
// zero, else continue the sums stored in c.
template <int R, bool kTwoVectors>
SRKIT_BF16_TARGET void block(const uint32_t* pa, const uint32_t* pb, int w, int n, bool first,
                             float* c, size_t ldc) {
  const __mmask16 m0 = w >= 16 ? __mmask16(0xffff) : __mmask16((1u << w) - 1);
  const __mmask16 m1 = w >= 32 ? __mmask16(0xffff) : __mmask16(((1u << (w - 16)) - 1) * (w > 16));
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
