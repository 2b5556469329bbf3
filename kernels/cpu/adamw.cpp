#include "kernels/cpu/adamw.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "kernels/common/sr_bits.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/isa_target.h"
#include "kernels/cpu/philox_simd.h"

// sqrtf in the element math vectorizes only without errno semantics; with them
// GCC keeps a scalar libm call per element and the step runs several times slower.
#if defined(__GNUC__) && !defined(__NO_MATH_ERRNO__)
#warning "kernels/cpu/adamw.cpp: build with -fno-math-errno, or the AdamW loops stay scalar"
#endif

namespace srkit::cpu {
namespace {

// The SR lanes of a Philox block are its 32-bit words read as 16-bit halves,
// low half first (sr_lane), which is how a little-endian machine lays them out.
static_assert(std::endian::native == std::endian::little, "SR lane layout assumes little-endian");

constexpr size_t kChunk = size_t(1) << 16;  // telemetry reduction unit (elements)
constexpr size_t kTile = 512;               // elements per batch of SR bits, a multiple of 8
// SR groups a tile's bit buffers hold: a tile not starting on a group boundary
// spans kTile / 8 + 1 groups, and the Philox fills whole batches of 32 groups.
constexpr size_t kTileGroups =
    (kTile / 8 + 1 + kSrBatchGroups - 1) / kSrBatchGroups * kSrBatchGroups;

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

// The Philox streams of the three SR purposes at this step (key schedules
// computed once per step).
struct SrStreams {
  SrStream w, m, v;
  explicit SrStreams(const AdamWHyper& h)
      : w(sr_stream(h.seed, RngPurpose::kWeightUpdate, h.step)),
        m(sr_stream(h.seed, RngPurpose::kFirstMoment, h.step)),
        v(sr_stream(h.seed, RngPurpose::kSecondMoment, h.step)) {}
};

// lanes[k] = the 16 SR bits of global element 8 * g0 + k, for at least ngroups
// groups (whole batches of 32; lanes has room for them).
void fill_lanes(uint16_t* lanes, const SrStream& stream, uint64_t g0, size_t ngroups) {
  for (size_t k = 0; k < ngroups; k += kSrBatchGroups) {
    sr_bits_batch(stream, g0 + k, lanes + kSrElementsPerPhilox * k);
  }
}

// SR bits of a tile's elements, from element 0 of the current sub-range.
struct TileBits {
  const uint16_t *w, *m, *v;
  TileBits offset(size_t k) const { return {w + k, m + k, v + k}; }
};

// Telemetry terms of one element into per-tile accumulators: fp32 sums and
// 32-bit counts, 8 to a vector (fp64 lanes measured a quarter of its cost).
// A tile has at most kTile elements, so each SIMD lane sums a few dozen terms
// (relative error ~1e-6); tiles and chunks then add up in fp64.
inline void tally(float update, float w, bool m_stalled, bool v_stalled, float& usq, float& wsq,
                  uint32_t& nonzero, uint32_t& erased, uint32_t& ms, uint32_t& vs) {
  usq += update * update;
  wsq += w * w;
  nonzero += update != 0.0f;
  erased += adamw_erased(update, w);
  ms += m_stalled;
  vs += v_stalled;
}

// Elements [0, n) of `t` one per SIMD lane, through adamw_element. Always
// inlined, like pair_loop and step_tiles: the loops are then compiled for the
// instruction set of the step_piece they land in (AVX2 or AVX-512).
template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM, typename G, bool kTel,
          bool kDecay>
[[gnu::always_inline]] inline void element_loop(const AdamWArrays<WM, MM, VM, G>& t, TileBits b,
                                                size_t n, const AdamWHyper& hyper, Sums& sums) {
  using A = AdamWArrays<WM, MM, VM, G>;
  const AdamWHyper h = hyper;  // a local copy: stores through the arrays cannot alias it
  float usq = 0, wsq = 0;
  uint32_t nonzero = 0, erased = 0, ms = 0, vs = 0;
#pragma omp simd reduction(+ : usq, wsq, nonzero, erased, ms, vs)
  for (size_t k = 0; k < n; ++k) {
    const AdamWElemOut o =
        adamw_element(t, k, kDecay, h, A::kWeightSR ? uint32_t(b.w[k]) : 0u,
                      A::kMomentSR ? uint32_t(b.m[k]) : 0u, A::kVarianceSR ? uint32_t(b.v[k]) : 0u);
    if constexpr (kTel) {
      tally(o.update, o.weight, o.m_stalled, o.v_stalled, usq, wsq, nonzero, erased, ms, vs);
    }
  }
  if constexpr (kTel) sums.add(Sums{usq, wsq, nonzero, erased, ms, vs});
}

// Rules whose every array holds 16-bit elements take the pair path.
template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM, typename G>
constexpr bool use_pairs() {
  const bool weights16 = WM != AdamWWeightMode::kF32 && WM != AdamWWeightMode::kMasterF32;
  return weights16 && std::is_same_v<G, bf16> && MM != AdamWStateMode::kF32 &&
         VM != AdamWStateMode::kF32;
}

inline uint32_t load_pair(const void* base, size_t k) {
  uint32_t x;
  std::memcpy(&x, static_cast<const char*>(base) + 4 * k, 4);
  return x;
}
inline void store_pair(void* base, size_t k, uint32_t x) {
  std::memcpy(static_cast<char*>(base) + 4 * k, &x, 4);
}
inline uint16_t half(uint32_t x, int j) { return uint16_t(x >> (16 * j)); }

// Elements [0, 2 * npairs) of `t` (element 0 at an even global index), two per
// 32-bit SIMD lane: element 2k in the low half of word k, as memory holds them
// and as an SR word holds their bits. Widening bf16 is then a shift or a mask
// and narrowing a shift and an or, where one element per lane needs shuffles
// (a single port on many x86 cores) to move 16-bit halves across lanes.
template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM, typename G, bool kTel,
          bool kDecay>
[[gnu::always_inline]] inline void pair_loop(const AdamWArrays<WM, MM, VM, G>& t, TileBits b,
                                             size_t npairs, const AdamWHyper& hyper, Sums& sums) {
  using A = AdamWArrays<WM, MM, VM, G>;
  const AdamWHyper h = hyper;  // a local copy: stores through the arrays cannot alias it
  constexpr bool kAux = WM == AdamWWeightMode::kRem16 || WM == AdamWWeightMode::kKahan;
  void* aux = nullptr;  // rem16 remainders or Kahan compensations
  if constexpr (WM == AdamWWeightMode::kRem16) aux = t.master;
  if constexpr (WM == AdamWWeightMode::kKahan) aux = t.kahan;
  float usq = 0, wsq = 0;
  uint32_t nonzero = 0, erased = 0, ms = 0, vs = 0;
#pragma omp simd reduction(+ : usq, wsq, nonzero, erased, ms, vs)
  for (size_t k = 0; k < npairs; ++k) {
    const uint32_t gp = load_pair(t.g, k), mp = load_pair(t.m, k), vp = load_pair(t.v, k);
    const uint32_t wp = load_pair(t.w, k);
    [[maybe_unused]] const uint32_t xp = kAux ? load_pair(aux, k) : 0u;
    const uint32_t rwp = A::kWeightSR ? load_pair(b.w, k) : 0u;
    const uint32_t rmp = A::kMomentSR ? load_pair(b.m, k) : 0u;
    const uint32_t rvp = A::kVarianceSR ? load_pair(b.v, k) : 0u;
    uint32_t w_out = 0, x_out = 0, m_out = 0, v_out = 0;
    const auto element = [&](int j) {
      const bf16 w16{half(wp, j)}, m_old{half(mp, j)}, v_old{half(vp, j)};
      float w = bf16_to_float(w16), comp = 0.0f;
      if constexpr (WM == AdamWWeightMode::kRem16) w = rem16_join(w16, int16_t(half(xp, j)));
      if constexpr (WM == AdamWWeightMode::kKahan) comp = bf16_to_float(bf16{half(xp, j)});
      const AdamWMath r = adamw_math(bf16_to_float(bf16{half(gp, j)}), bf16_to_float(m_old),
                                     bf16_to_float(v_old), w, kDecay, h);
      const AdamWWeightNew nw = adamw_new_weight<WM>(w, r.update, comp, half(rwp, j));
      const bf16 m_new = adamw_round_state<MM>(r.m, half(rmp, j));
      const bf16 v_new = adamw_round_state<VM>(r.v, half(rvp, j));
      w_out |= uint32_t(nw.w16.bits) << (16 * j);
      if constexpr (WM == AdamWWeightMode::kRem16) x_out |= uint32_t(uint16_t(nw.rem)) << (16 * j);
      if constexpr (WM == AdamWWeightMode::kKahan) x_out |= uint32_t(nw.comp.bits) << (16 * j);
      m_out |= uint32_t(m_new.bits) << (16 * j);
      v_out |= uint32_t(v_new.bits) << (16 * j);
      if constexpr (kTel) {
        tally(r.update, w, adamw_stalled(r.m, m_old, m_new), adamw_stalled(r.v, v_old, v_new), usq,
              wsq, nonzero, erased, ms, vs);
      }
    };
    element(0);
    element(1);
    store_pair(t.w, k, w_out);
    if constexpr (kAux) store_pair(aux, k, x_out);
    store_pair(t.m, k, m_out);
    store_pair(t.v, k, v_out);
  }
  if constexpr (kTel) sums.add(Sums{usq, wsq, nonzero, erased, ms, vs});
}

// Global elements [lo, hi) of one segment; `a` points at global index `begin`.
// kDecay is a template argument so the SIMD loops have no branch.
template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM, typename G, bool kTel,
          bool kDecay>
[[gnu::always_inline]] inline void step_tiles(const AdamWArrays<WM, MM, VM, G>& a, size_t begin,
                                              size_t lo, size_t hi, const AdamWHyper& h,
                                              const SrStreams& streams, Sums& sums) {
  using A = AdamWArrays<WM, MM, VM, G>;
  alignas(64) uint16_t rw[8 * kTileGroups], rm[8 * kTileGroups], rv[8 * kTileGroups];
  for (size_t t0 = lo; t0 < hi;) {
    const size_t t1 = std::min(hi, (t0 / kTile + 1) * kTile);
    const uint64_t g0 = t0 / 8;
    const size_t ngroups = size_t((t1 - 1) / 8 - g0 + 1);
    if constexpr (A::kWeightSR) fill_lanes(rw, streams.w, g0, ngroups);
    if constexpr (A::kMomentSR) fill_lanes(rm, streams.m, g0, ngroups);
    if constexpr (A::kVarianceSR) fill_lanes(rv, streams.v, g0, ngroups);
    const size_t skip = t0 - 8 * g0;
    const TileBits bits{rw + skip, rm + skip, rv + skip};
    const A t = a.offset(t0 - begin);
    const size_t n = t1 - t0;
    if constexpr (use_pairs<WM, MM, VM, G>()) {
      // Pairs start on even global indices: an odd first or last element goes alone.
      const size_t first = t0 & 1, last = (t1 & 1) && n > first ? n - 1 : n;
      if (first) element_loop<WM, MM, VM, G, kTel, kDecay>(t, bits, 1, h, sums);
      pair_loop<WM, MM, VM, G, kTel, kDecay>(t.offset(first), bits.offset(first),
                                             (last - first) / 2, h, sums);
      if (last < n) {
        element_loop<WM, MM, VM, G, kTel, kDecay>(t.offset(last), bits.offset(last), 1, h, sums);
      }
    } else {
      element_loop<WM, MM, VM, G, kTel, kDecay>(t, bits, n, h, sums);
    }
    t0 = t1;
  }
}

// step_tiles compiled for the build's baseline (AVX2)...
template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM, typename G, bool kTel,
          bool kDecay>
void step_piece(const AdamWArrays<WM, MM, VM, G>& a, size_t begin, size_t lo, size_t hi,
                const AdamWHyper& h, const SrStreams& streams, Sums& sums) {
  step_tiles<WM, MM, VM, G, kTel, kDecay>(a, begin, lo, hi, h, streams, sums);
}

// ...and for AVX-512 (kernels/cpu/cpu_isa.h), twice the lanes per instruction.
// Every stored bit is the same: each element's math is exact IEEE operations
// without contraction, whatever the vector width. The telemetry's fp32 sums
// of squares would not be (the lanes split the sums differently), so steps
// with telemetry always take the baseline path.
SRKIT_AVX512_WARNINGS_BEGIN
template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM, typename G, bool kDecay>
SRKIT_TARGET_AVX512 void step_piece_avx512(const AdamWArrays<WM, MM, VM, G>& a, size_t begin,
                                           size_t lo, size_t hi, const AdamWHyper& h,
                                           const SrStreams& streams, Sums& sums) {
  step_tiles<WM, MM, VM, G, false, kDecay>(a, begin, lo, hi, h, streams, sums);
}
SRKIT_AVX512_WARNINGS_END

// Index of the last segment starting at or before element i (segments are
// sorted and start at 0; zero-length ones it may land on are skipped by callers).
size_t segment_at(const ParamSegment* segs, size_t nseg, size_t i) {
  const ParamSegment* after = std::upper_bound(
      segs, segs + nseg, i, [](size_t x, const ParamSegment& p) { return x < p.offset; });
  return size_t(after - segs) - 1;
}

struct StepCall {
  const AdamWBuffers& buffers;
  const ParamSegment* segs;
  size_t nseg, begin, end;
  const AdamWHyper& h;
  AdamWTelemetry* telemetry;

  template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM, typename G>
  void run() const {
    if (telemetry) {
      family<WM, MM, VM, G, true>();
    } else {
      family<WM, MM, VM, G, false>();
    }
  }

  template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM, typename G, bool kTel>
  void family() const {
    const auto a = AdamWArrays<WM, MM, VM, G>::from(buffers);
    const SrStreams streams(h);
    const bool avx512 = !kTel && cpu_isa() == CpuIsa::kAvx512;  // outside the team: it may throw
    const size_t nchunks = (end - begin + kChunk - 1) / kChunk;
    std::vector<Sums> chunk_sums(kTel ? nchunks : 0);
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < nchunks; ++c) {
      const size_t c0 = begin + c * kChunk, c1 = std::min(end, c0 + kChunk);
      size_t s = segment_at(segs, nseg, c0);
      Sums sums;
      for (size_t lo = c0; lo < c1; ++s) {
        const size_t hi = std::min(c1, segs[s].offset + segs[s].count);
        if (hi <= lo) continue;
        if (avx512) {
          if (segs[s].decay) {
            step_piece_avx512<WM, MM, VM, G, true>(a, begin, lo, hi, h, streams, sums);
          } else {
            step_piece_avx512<WM, MM, VM, G, false>(a, begin, lo, hi, h, streams, sums);
          }
        } else if (segs[s].decay) {
          step_piece<WM, MM, VM, G, kTel, true>(a, begin, lo, hi, h, streams, sums);
        } else {
          step_piece<WM, MM, VM, G, kTel, false>(a, begin, lo, hi, h, streams, sums);
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
