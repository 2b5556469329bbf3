#include "kernels/cpu/adamw.h"

#include <algorithm>
#include <bit>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kernels/common/philox.h"
#include "kernels/common/sr_bits.h"

namespace srkit::cpu {
namespace {

// The SR lanes of a Philox block are its 32-bit words read as 16-bit halves,
// low half first (sr_lane), which is how a little-endian machine lays them out.
static_assert(std::endian::native == std::endian::little, "SR lane layout assumes little-endian");

constexpr size_t kChunk = size_t(1) << 16;  // telemetry reduction unit (elements)
constexpr size_t kTile = 512;               // elements per batch of SR bits, a multiple of 8
constexpr size_t kTileGroups =
    kTile / 8 + 1;  // a tile not starting on a group boundary spans one more

struct Sums {
  double update_sq = 0, weight_sq = 0;
  uint64_t nonzero = 0, erased = 0, m_stalled = 0, v_stalled = 0;
  void add(const Sums& o) {
    update_sq += o.update_sq;
    weight_sq += o.weight_sq;
    nonzero += o.nonzero;
    erased += o.erased;
    m_stalled += o.m_stalled;
    v_stalled += o.v_stalled;
  }
};

#if defined(__AVX2__)
// Philox4x32-10 (kernels/common/philox.h) of 8 consecutive groups at once, one
// group per 32-bit lane. GCC's own vectorization of philox4x32_10 shuffles
// 64-bit products across lanes and costs about as much as the whole rest of the
// update; this is the same rounds with the products split into even and odd
// lanes. Tests hold the step's SR results to sr_bits16 bit for bit.
inline void mulhilo8(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  // vpmuludq reads the low 32 bits of each 64-bit lane; shuffles move the odd
  // words into place (cheaper than 64-bit shifts, which share one port on Zen 2).
  const __m256i even = _mm256_mul_epu32(a, m);                             // words 0,2,4,6
  const __m256i odd = _mm256_mul_epu32(_mm256_shuffle_epi32(a, 0xF5), m);  // words 1,3,5,7
  lo = _mm256_blend_epi32(even, _mm256_shuffle_epi32(odd, 0xA0), 0xAA);
  hi = _mm256_blend_epi32(_mm256_shuffle_epi32(even, 0xF5), odd, 0xAA);
}

// out[0..128): the SR lanes of groups g0 .. g0+15, in sr_lane order. Two
// independent batches of 8 interleave so the multiplier latency of one round
// overlaps the other batch (one batch alone is latency-bound).
void philox_16_groups(uint16_t* out, uint64_t seed, uint64_t sub, uint64_t g0) {
  using namespace philox_detail;
  constexpr int kB = 2;
  alignas(32) uint32_t lo32[8 * kB], hi32[8 * kB];
  for (int j = 0; j < 8 * kB; ++j) {
    lo32[j] = uint32_t(g0 + uint64_t(j));
    hi32[j] = uint32_t((g0 + uint64_t(j)) >> 32);
  }
  __m256i c0[kB], c1[kB], c2[kB], c3[kB];
  for (int b = 0; b < kB; ++b) {
    c0[b] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo32 + 8 * b));
    c1[b] = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi32 + 8 * b));
    c2[b] = _mm256_set1_epi32(int(uint32_t(sub)));
    c3[b] = _mm256_set1_epi32(int(uint32_t(sub >> 32)));
  }
  const __m256i m0 = _mm256_set1_epi32(int(kM0)), m1 = _mm256_set1_epi32(int(kM1));
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const __m256i key0 = _mm256_set1_epi32(int(k0)), key1 = _mm256_set1_epi32(int(k1));
    for (int b = 0; b < kB; ++b) {
      __m256i hi0, lo0, hi1, lo1;
      mulhilo8(c0[b], m0, hi0, lo0);
      mulhilo8(c2[b], m1, hi1, lo1);
      c0[b] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[b]), key0);
      c1[b] = lo1;
      c2[b] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[b]), key1);
      c3[b] = lo0;
    }
    k0 += kW0;
    k1 += kW1;
  }
  // Transpose words (c0..c3 x 8 groups) into 8 groups of 4 words = 16-bit lanes.
  __m256i* dst = reinterpret_cast<__m256i*>(out);
  for (int b = 0; b < kB; ++b) {
    const __m256i t0 = _mm256_unpacklo_epi32(c0[b], c1[b]),
                  t1 = _mm256_unpackhi_epi32(c0[b], c1[b]);
    const __m256i t2 = _mm256_unpacklo_epi32(c2[b], c3[b]),
                  t3 = _mm256_unpackhi_epi32(c2[b], c3[b]);
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    _mm256_storeu_si256(dst + 4 * b + 0, _mm256_permute2x128_si256(u0, u1, 0x20));  // groups 0, 1
    _mm256_storeu_si256(dst + 4 * b + 1, _mm256_permute2x128_si256(u2, u3, 0x20));  // groups 2, 3
    _mm256_storeu_si256(dst + 4 * b + 2, _mm256_permute2x128_si256(u0, u1, 0x31));  // groups 4, 5
    _mm256_storeu_si256(dst + 4 * b + 3, _mm256_permute2x128_si256(u2, u3, 0x31));  // groups 6, 7
  }
}
#endif

// lanes[k] = the 16 SR bits of global element 8 * g0 + k, for at least ngroups
// groups (the AVX2 path fills whole batches of 16; lanes has room for them).
void fill_lanes(uint16_t* lanes, const AdamWHyper& h, RngPurpose purpose, uint64_t g0,
                size_t ngroups) {
#if defined(__AVX2__)
  const uint64_t sub = sr_subsequence(uint32_t(purpose), h.step);
  for (size_t k = 0; k < ngroups; k += 16) philox_16_groups(lanes + 8 * k, h.seed, sub, g0 + k);
#else
  for (size_t k = 0; k < ngroups; ++k) {
    const Philox4 b = sr_block(h.seed, uint32_t(purpose), h.step, g0 + k);
    for (unsigned l = 0; l < 8; ++l) lanes[8 * k + l] = uint16_t(sr_lane(b, l));
  }
#endif
}

// Global elements [lo, hi) of one segment; `a` points at global index `begin`.
// kDecay is a template argument so the SIMD loop has no branch.
template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM, bool kTel, bool kDecay>
void step_piece(const AdamWArrays<WM, MM, VM>& a, size_t begin, size_t lo, size_t hi,
                const AdamWHyper& h, Sums& sums) {
  using A = AdamWArrays<WM, MM, VM>;
  alignas(64) uint16_t rw[8 * kTileGroups], rm[8 * kTileGroups], rv[8 * kTileGroups];
  for (size_t t0 = lo; t0 < hi;) {
    const size_t t1 = std::min(hi, (t0 / kTile + 1) * kTile);
    const uint64_t g0 = t0 / 8;
    const size_t ngroups = size_t((t1 - 1) / 8 - g0 + 1);
    if constexpr (A::kWeightSR) fill_lanes(rw, h, RngPurpose::kWeightUpdate, g0, ngroups);
    if constexpr (A::kMomentSR) fill_lanes(rm, h, RngPurpose::kFirstMoment, g0, ngroups);
    if constexpr (A::kVarianceSR) fill_lanes(rv, h, RngPurpose::kSecondMoment, g0, ngroups);
    const size_t skip = t0 - 8 * g0;
    const uint16_t* bw = rw + skip;
    const uint16_t* bm = rm + skip;
    const uint16_t* bv = rv + skip;
    const A t = a.offset(t0 - begin);
    const size_t n = t1 - t0;
    double usq = 0, wsq = 0;
    uint32_t nonzero = 0, erased = 0, ms = 0,
             vs = 0;  // a tile is < 2^32 elements: 8 lanes a vector
#pragma omp simd reduction(+ : usq, wsq, nonzero, erased, ms, vs)
    for (size_t k = 0; k < n; ++k) {
      const AdamWElemOut o =
          adamw_element(t, k, kDecay, h, A::kWeightSR ? uint32_t(bw[k]) : 0u,
                        A::kMomentSR ? uint32_t(bm[k]) : 0u, A::kVarianceSR ? uint32_t(bv[k]) : 0u);
      if constexpr (kTel) {
        usq += double(o.update) * double(o.update);
        wsq += double(o.weight) * double(o.weight);
        nonzero += o.update != 0.0f;
        erased += adamw_erased(o.update, o.weight);
        ms += o.m_stalled;
        vs += o.v_stalled;
      }
    }
    if constexpr (kTel) sums.add(Sums{usq, wsq, nonzero, erased, ms, vs});
    t0 = t1;
  }
}

struct StepCall {
  const AdamWBuffers& buffers;
  const ParamSegment* segs;
  size_t nseg, begin, end;
  const AdamWHyper& h;
  AdamWTelemetry* telemetry;

  template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM>
  void run() const {
    if (telemetry) {
      family<WM, MM, VM, true>();
    } else {
      family<WM, MM, VM, false>();
    }
  }

  template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM, bool kTel>
  void family() const {
    const auto a = AdamWArrays<WM, MM, VM>::from(buffers);
    const size_t nchunks = (end - begin + kChunk - 1) / kChunk;
    std::vector<Sums> chunk_sums(kTel ? nchunks : 0);
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < nchunks; ++c) {
      const size_t c0 = begin + c * kChunk, c1 = std::min(end, c0 + kChunk);
      // Last segment starting at or before c0 (zero-length ones are skipped below).
      size_t s =
          size_t(std::upper_bound(segs, segs + nseg, c0,
                                  [](size_t x, const ParamSegment& p) { return x < p.offset; }) -
                 segs) -
          1;
      Sums sums;
      for (size_t lo = c0; lo < c1; ++s) {
        const size_t hi = std::min(c1, segs[s].offset + segs[s].count);
        if (hi <= lo) continue;
        if (segs[s].decay) {
          step_piece<WM, MM, VM, kTel, true>(a, begin, lo, hi, h, sums);
        } else {
          step_piece<WM, MM, VM, kTel, false>(a, begin, lo, hi, h, sums);
        }
        lo = hi;
      }
      if constexpr (kTel) chunk_sums[c] = sums;
    }
    if constexpr (kTel) {
      Sums total;
      for (const Sums& s : chunk_sums) total.add(s);
      *telemetry = AdamWTelemetry{total.update_sq, total.weight_sq, end - begin,    total.nonzero,
                                  total.erased,    total.m_stalled, total.v_stalled};
    }
  }
};

}  // namespace

void adamw_step(const AdamWRule& rule, const AdamWBuffers& buffers, const ParamSegment* segs,
                size_t nseg, size_t begin, size_t end, const AdamWHyper& hyper,
                AdamWTelemetry* telemetry) {
  adamw_check_call("cpu::adamw_step", rule, buffers, segs, nseg, begin, end, hyper);
  if (telemetry) *telemetry = AdamWTelemetry{};
  if (begin == end) return;
  StepCall call{buffers, segs, nseg, begin, end, hyper, telemetry};
  adamw_dispatch(rule, call);
}

}  // namespace srkit::cpu
