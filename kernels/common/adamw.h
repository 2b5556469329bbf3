// The per-element AdamW update of every precision strategy, host+device: the
// CPU loops (kernels/cpu/adamw.cpp) and the CUDA kernel (kernels/cuda/adamw.cu)
// call exactly these bodies (adamw_element, or its value-level parts
// adamw_math, adamw_new_weight and adamw_round_state), so the two devices store
// the same bits.
//
// Arithmetic is fp32 in one fixed order (no FMA: the build turns contraction off):
//   g    = g * grad_scale
//   m    = beta1 * m + (1 - beta1) * g
//   v    = beta2 * v + (1 - beta2) * (g * g)
//   mhat = m / bias_correction1            vhat = v / bias_correction2
//   dir  = mhat / (sqrtf(vhat) + eps)      dir = dir + weight_decay * w  (decaying segments only)
//   update = -lr * dir
// where w is the fp32 weight the update applies to: the weight itself, or the
// master where there is one (f32 master, or bf16 weight + remainder). The new
// weight is then stored per strategy (AdamWWeightMode), m and v per
// AdamWStateMode. SR bits follow the random-bits contract (sr_bits.h) with
// purposes kWeightUpdate, kFirstMoment and kSecondMoment at the global index.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/common/bf16.h"
#include "kernels/common/dtype.h"
#include "kernels/common/hd.h"
#include "kernels/common/sr_bits.h"

namespace srkit {

// Where fp32 master weights live, if anywhere. kRem16: the bf16 weight plus a
// signed 16-bit remainder are together an exact fp32 master (see rem16_split).
enum class MasterKind : uint8_t { kNone, kF32, kRem16 };

// Kernel-level encoding of a precision strategy (lib/precision.h builds it).
// grads: the gradients' dtype, the weights' own or fp32 (bf16 weights with fp32
// gradients: the backward stores the weight gradients unrounded). weight_sr
// applies to bf16 weights without master; kahan adds a bf16 compensation
// buffer to bf16 RN weights.
struct AdamWRule {
  DType weights = DType::kBF16;
  DType grads = DType::kBF16;
  MasterKind master = MasterKind::kNone;
  DType m = DType::kBF16, v = DType::kBF16;
  bool weight_sr = false, m_sr = false, v_sr = false, kahan = false;
};

struct AdamWHyper {
  float lr, beta1, beta2, eps, weight_decay;
  float bias_correction1, bias_correction2;  // 1 - beta^t
  float grad_scale;  // global-norm clip factor (and any 1/accum) applied to g
  uint64_t seed;
  uint64_t step;  // SR subsequence, < 2^48
};

// Flat-buffer range [offset, offset + count) and whether weight decay applies to it.
struct ParamSegment {
  size_t offset, count;
  bool decay;
};

// Shard-local arrays; dtype per rule, nullptr where the rule has no such array.
// master is float* (MasterKind::kF32) or int16_t* (kRem16); kahan is bf16*.
struct AdamWBuffers {
  void* weights;
  void* grads;
  void* master;
  void* m;
  void* v;
  void* kahan;
};

// Sums over the elements of one step call.
struct AdamWTelemetry {
  double update_sq = 0, weight_sq = 0;  // sum update^2, sum w^2 (w before the update)
  uint64_t n = 0;                       // elements stepped
  uint64_t nonzero = 0;                 // update != 0
  uint64_t erased = 0;     // 0 < |update| < half a bf16 ulp of w: what RN of a bf16 weight drops
  uint64_t m_stalled = 0;  // bf16 m: fp32 new value differs from the old, rounds back to it
  uint64_t v_stalled = 0;  // same for v
};

// ---- rule families ---------------------------------------------------------
// One kernel instantiation per (weight mode, m mode, v mode): no per-element switch.
enum class AdamWWeightMode : uint8_t { kF32, kBF16RN, kBF16SR, kMasterF32, kRem16, kKahan };
enum class AdamWStateMode : uint8_t { kF32, kBF16RN, kBF16SR };

// nullptr when the rule is consistent, else what is wrong (host only).
inline const char* adamw_rule_error(const AdamWRule& r) {
  if (r.grads != r.weights && r.grads != DType::kF32) {
    return "g=bf16 needs w=bf16 (f32 weights have f32 gradients)";
  }
  if (r.weights == DType::kF32) {
    if (r.master != MasterKind::kNone) return "f32 weights cannot have a master copy (master=none)";
    if (r.kahan) return "f32 weights cannot have a Kahan compensation buffer (kahan=off)";
    if (r.weight_sr) return "f32 weights are not rounded, so update=sr does not apply";
  }
  if (r.master != MasterKind::kNone) {
    if (r.kahan)
      return "Kahan compensation is meaningless with master weights (kahan=off or master=none)";
    if (r.weight_sr)
      return "weights with a master are rounded to nearest from it, so update=sr does not apply";
  }
  if (r.kahan && r.weight_sr)
    return "Kahan compensation works on round-to-nearest updates (update=rn)";
  if (r.m == DType::kF32 && r.m_sr) return "mround=sr needs m=bf16";
  if (r.v == DType::kF32 && r.v_sr) return "vround=sr needs v=bf16";
  return nullptr;
}

// Valid rules only (see adamw_rule_error).
inline AdamWWeightMode adamw_weight_mode(const AdamWRule& r) {
  if (r.weights == DType::kF32) return AdamWWeightMode::kF32;
  if (r.master == MasterKind::kF32) return AdamWWeightMode::kMasterF32;
  if (r.master == MasterKind::kRem16) return AdamWWeightMode::kRem16;
  if (r.kahan) return AdamWWeightMode::kKahan;
  return r.weight_sr ? AdamWWeightMode::kBF16SR : AdamWWeightMode::kBF16RN;
}

inline AdamWStateMode adamw_state_mode(DType t, bool sr) {
  if (t == DType::kF32) return AdamWStateMode::kF32;
  return sr ? AdamWStateMode::kBF16SR : AdamWStateMode::kBF16RN;
}

// Throws std::invalid_argument naming `who` unless the segments are sorted,
// contiguous from offset 0 and cover [0, end) (a step's segment table; the
// CUDA step checks it once, when its plan is built).
inline void adamw_check_segments(const char* who, const ParamSegment* segs, size_t nseg,
                                 size_t end) {
  const auto fail = [who](const std::string& what) {
    throw std::invalid_argument(std::string(who) + ": " + what);
  };
  if (nseg == 0 || !segs) fail("no parameter segments");
  if (segs[0].offset != 0) fail("segments must start at offset 0");
  for (size_t s = 1; s < nseg; ++s) {
    if (segs[s].offset != segs[s - 1].offset + segs[s - 1].count) {
      fail("segment " + std::to_string(s) + " does not start where segment " +
           std::to_string(s - 1) + " ends");
    }
  }
  if (segs[nseg - 1].offset + segs[nseg - 1].count < end) {
    fail("segments end before element " + std::to_string(end));
  }
}

// Throws std::invalid_argument naming `who` when a step call is malformed:
// inconsistent rule, a missing buffer the rule needs, begin > end, a step past
// the SR contract's 2^48, or segments that are not sorted, contiguous from 0 and
// covering [begin, end).
inline void adamw_check_call(const char* who, const AdamWRule& r, const AdamWBuffers& b,
                             const ParamSegment* segs, size_t nseg, size_t begin, size_t end,
                             const AdamWHyper& h) {
  const auto fail = [who](const std::string& what) {
    throw std::invalid_argument(std::string(who) + ": " + what);
  };
  if (const char* why = adamw_rule_error(r)) fail(std::string("invalid rule: ") + why);
  if (begin > end) fail("begin " + std::to_string(begin) + " > end " + std::to_string(end));
  if (h.step > kSrMaxStep) fail("step " + std::to_string(h.step) + " exceeds 2^48 - 1");
  if (begin == end) return;
  if (!b.weights || !b.grads || !b.m || !b.v) fail("weights, grads, m and v buffers are required");
  if (r.master != MasterKind::kNone && !b.master) fail("the rule has a master but master is null");
  if (r.kahan && !b.kahan) fail("the rule uses Kahan compensation but kahan is null");
  adamw_check_segments(who, segs, nseg, end);
}

// The gradients' element type of a family: the weights' dtype, or fp32 where
// bf16 weights have fp32 gradients (AdamWRule::grads).
template <AdamWWeightMode WM, bool kF32Grads>
using AdamWGrad = std::conditional_t<WM == AdamWWeightMode::kF32 || kF32Grads, float, bf16>;

// Calls f.template run<WM, MM, VM, G>() for the rule's family (valid rules
// only): the one place that maps a runtime rule to a compile-time kernel.
template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM, typename F>
void adamw_dispatch_g(bool f32_grads, F& f) {
  if (WM != AdamWWeightMode::kF32 && f32_grads) {
    return f.template run<WM, MM, VM, AdamWGrad<WM, true>>();
  }
  return f.template run<WM, MM, VM, AdamWGrad<WM, false>>();
}

template <AdamWWeightMode WM, AdamWStateMode MM, typename F>
void adamw_dispatch_v(AdamWStateMode v, bool f32_grads, F& f) {
  switch (v) {
    case AdamWStateMode::kF32:
      return adamw_dispatch_g<WM, MM, AdamWStateMode::kF32>(f32_grads, f);
    case AdamWStateMode::kBF16RN:
      return adamw_dispatch_g<WM, MM, AdamWStateMode::kBF16RN>(f32_grads, f);
    case AdamWStateMode::kBF16SR:
      return adamw_dispatch_g<WM, MM, AdamWStateMode::kBF16SR>(f32_grads, f);
  }
}

template <AdamWWeightMode WM, typename F>
void adamw_dispatch_mv(AdamWStateMode m, AdamWStateMode v, bool f32_grads, F& f) {
  switch (m) {
    case AdamWStateMode::kF32:
      return adamw_dispatch_v<WM, AdamWStateMode::kF32>(v, f32_grads, f);
    case AdamWStateMode::kBF16RN:
      return adamw_dispatch_v<WM, AdamWStateMode::kBF16RN>(v, f32_grads, f);
    case AdamWStateMode::kBF16SR:
      return adamw_dispatch_v<WM, AdamWStateMode::kBF16SR>(v, f32_grads, f);
  }
}

template <typename F>
void adamw_dispatch(const AdamWRule& r, F& f) {
  const AdamWStateMode m = adamw_state_mode(r.m, r.m_sr), v = adamw_state_mode(r.v, r.v_sr);
  const bool g = r.grads == DType::kF32;
  switch (adamw_weight_mode(r)) {
    case AdamWWeightMode::kF32:
      return adamw_dispatch_mv<AdamWWeightMode::kF32>(m, v, g, f);
    case AdamWWeightMode::kBF16RN:
      return adamw_dispatch_mv<AdamWWeightMode::kBF16RN>(m, v, g, f);
    case AdamWWeightMode::kBF16SR:
      return adamw_dispatch_mv<AdamWWeightMode::kBF16SR>(m, v, g, f);
    case AdamWWeightMode::kMasterF32:
      return adamw_dispatch_mv<AdamWWeightMode::kMasterF32>(m, v, g, f);
    case AdamWWeightMode::kRem16:
      return adamw_dispatch_mv<AdamWWeightMode::kRem16>(m, v, g, f);
    case AdamWWeightMode::kKahan:
      return adamw_dispatch_mv<AdamWWeightMode::kKahan>(m, v, g, f);
  }
}

// Bytes per element of each array of a rule (0: the rule has none). Memory
// accounting (bytes_per_param) and benchmark traffic are sums of these.
struct AdamWArrayBytes {
  size_t weights, grads, master, m, v, kahan;
  size_t total() const { return weights + grads + master + m + v + kahan; }
};

inline AdamWArrayBytes adamw_array_bytes(const AdamWRule& r) {
  const size_t w = dtype_size(r.weights);
  const size_t master = r.master == MasterKind::kF32 ? 4 : r.master == MasterKind::kRem16 ? 2 : 0;
  return {
      w, dtype_size(r.grads), master, dtype_size(r.m), dtype_size(r.v), size_t(r.kahan ? 2 : 0)};
}

// Bytes one step must move per element: it reads grads, m, v, master, kahan and
// the weights (except with an f32 master, whose bf16 weights are write-only),
// and writes weights, m, v, master and kahan.
inline size_t adamw_traffic_bytes(const AdamWRule& r) {
  const AdamWArrayBytes b = adamw_array_bytes(r);
  const size_t reads =
      (r.master == MasterKind::kF32 ? 0 : b.weights) + b.grads + b.master + b.m + b.v + b.kahan;
  const size_t writes = b.weights + b.master + b.m + b.v + b.kahan;
  return reads + writes;
}

// ---- bf16 weight + 16-bit remainder = exact fp32 master --------------------
// master bits M = (w.bits << 16) + r (32-bit wrap-around, r sign-extended).
// w must be a nearest bf16 of M with M - (w.bits << 16) in [-0x8000, 0x7fff]:
// that is w = RN(M) except at exact ties (low half 0x8000), where both
// neighbours are equally near and RN's even choice would need r = +0x8000,
// one value more than 16 bits hold; there w is the neighbour above in bit
// pattern (larger magnitude) and r = -0x8000. Every non-NaN pattern, subnormals,
// zeros and +-Inf included, round-trips exactly. Near overflow, masters with
// magnitude >= 0x7f7f8000 (about 3.3961e38, past the midpoint between the largest
// finite bf16 and 2^128) keep an exact master but a forward weight of +-Inf, as
// RN would give. NaN splits into a quiet bf16 NaN and r = 0: it stays NaN, its
// payload's low bits are not kept.
struct Rem16 {
  bf16 w;
  int16_t r;
};

SRKIT_HD Rem16 rem16_split(float master) {
  const uint32_t u = float_as_bits(master);
  if (float_bits_is_nan(u)) return Rem16{bf16_quiet_nan_from_bits(u), 0};
  const uint32_t hi = (u + 0x8000u) >> 16;  // no wrap: u <= 0xff800000 here
  return Rem16{bf16{uint16_t(hi)}, int16_t(uint16_t(u - (hi << 16)))};
}

SRKIT_HD float rem16_join(bf16 w, int16_t r) {
  return bits_as_float((uint32_t(w.bits) << 16) + uint32_t(int32_t(r)));
}

// ---- telemetry helpers -----------------------------------------------------
// 0.5f * bf16_ulp(w): 2^-8 times w's power of two (exact), clamped below to the
// subnormal spacing 2^-134 (zero and subnormal w) and above to 2^120 (Inf and
// NaN w, as bf16_ulp). Four SIMD operations where bf16_ulp's early returns keep
// GCC from vectorizing the telemetry loop at all.
SRKIT_HD float adamw_half_bf16_ulp(float w) {
  const float half = 0x1p-8f * bits_as_float(float_as_bits(w) & 0x7f800000u);
  const float lo = half < 0x1p-134f ? 0x1p-134f : half;
  return lo > 0x1p120f ? 0x1p120f : lo;
}

// A nonzero update smaller than half a bf16 ulp of w: round-to-nearest of a bf16
// weight would drop it (counted for every strategy, bf16 or not).
SRKIT_HD bool adamw_erased(float update, float w) {
  return (update != 0.0f) & (fabsf(update) < adamw_half_bf16_ulp(w));  // &, not &&: no branch
}

// ---- the element update ----------------------------------------------------
// G: the gradients' element type (AdamWGrad).
template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM,
          typename G = AdamWGrad<WM, false>>
struct AdamWArrays {
  using W = std::conditional_t<WM == AdamWWeightMode::kF32, float, bf16>;
  using Master = std::conditional_t<WM == AdamWWeightMode::kRem16, int16_t, float>;
  using M = std::conditional_t<MM == AdamWStateMode::kF32, float, bf16>;
  using V = std::conditional_t<VM == AdamWStateMode::kF32, float, bf16>;
  using Grad = G;
  static constexpr AdamWWeightMode kWeightMode = WM;
  static constexpr bool kHasMaster =
      WM == AdamWWeightMode::kMasterF32 || WM == AdamWWeightMode::kRem16;
  static constexpr bool kHasKahan = WM == AdamWWeightMode::kKahan;
  static constexpr bool kWeightSR = WM == AdamWWeightMode::kBF16SR;
  static constexpr bool kMomentSR = MM == AdamWStateMode::kBF16SR;
  static constexpr bool kVarianceSR = VM == AdamWStateMode::kBF16SR;

  W* w;
  const G* g;
  Master* master;
  M* m;
  V* v;
  bf16* kahan;

  static AdamWArrays from(const AdamWBuffers& b) {
    return {static_cast<W*>(b.weights),     static_cast<const G*>(b.grads),
            static_cast<Master*>(b.master), static_cast<M*>(b.m),
            static_cast<V*>(b.v),           static_cast<bf16*>(b.kahan)};
  }
  // The same arrays advanced by `elements` (a shard's or a sub-range's base).
  AdamWArrays offset(size_t elements) const {
    AdamWArrays a = *this;
    a.w += elements;
    a.g += elements;
    // Unused arrays stay nullptr (arithmetic on nullptr is undefined).
    if constexpr (kHasMaster) a.master += elements;
    a.m += elements;
    a.v += elements;
    if constexpr (kHasKahan) a.kahan += elements;
    return a;
  }
};

// ---- the math, on values ------------------------------------------------------
// The element update split into value-level steps, so that a caller may load
// and store in its own layout (the CPU's 16-bit path works on pairs of
// elements) while every result bit still comes from these bodies.

struct AdamWMath {
  float m, v;    // new moments, fp32 (before storage rounding)
  float update;  // the fp32 update of the weight
};

// The formula in the header comment. w: the fp32 weight the update applies to.
SRKIT_HD AdamWMath adamw_math(float g_in, float m_old, float v_old, float w, bool decay,
                              const AdamWHyper& h) {
  const float g = g_in * h.grad_scale;
  const float m = h.beta1 * m_old + (1.0f - h.beta1) * g;
  const float v = h.beta2 * v_old + (1.0f - h.beta2) * (g * g);
  const float mhat = m / h.bias_correction1;
  const float vhat = v / h.bias_correction2;
  const float dir = mhat / (sqrtf(vhat) + h.eps);
  return AdamWMath{m, v, -h.lr * (decay ? dir + h.weight_decay * w : dir)};
}

// A weight's storage after the update; each mode sets only its fields:
//   kF32: w32   kBF16RN, kBF16SR: w16   kMasterF32: master, w16
//   kRem16: w16, rem   kKahan: w16, comp
struct AdamWWeightNew {
  float w32, master;
  bf16 w16, comp;
  int16_t rem;
};

// comp: the Kahan compensation before the update (kKahan only); rw: SR bits.
template <AdamWWeightMode WM>
SRKIT_HD AdamWWeightNew adamw_new_weight(float w, float update, float comp, uint32_t rw) {
  AdamWWeightNew out{};
  if constexpr (WM == AdamWWeightMode::kF32) {
    out.w32 = w + update;
  } else if constexpr (WM == AdamWWeightMode::kBF16RN) {
    out.w16 = float_to_bf16_rn(w + update);
  } else if constexpr (WM == AdamWWeightMode::kBF16SR) {
    out.w16 = float_to_bf16_sr(w + update, rw);
  } else if constexpr (WM == AdamWWeightMode::kMasterF32) {
    out.master = w + update;
    out.w16 = float_to_bf16_rn(out.master);
  } else if constexpr (WM == AdamWWeightMode::kRem16) {
    const Rem16 s = rem16_split(w + update);
    out.w16 = s.w;
    out.rem = s.r;
  } else {  // kKahan: comp carries what rounding w dropped before
    const float y = update - comp;
    out.w16 = float_to_bf16_rn(w + y);
    out.comp = float_to_bf16_rn((bf16_to_float(out.w16) - w) - y);
  }
  return out;
}

// A moment's storage: fp32 as is, bf16 rounded to nearest or stochastically.
template <AdamWStateMode S>
SRKIT_HD std::conditional_t<S == AdamWStateMode::kF32, float, bf16> adamw_round_state(float x,
                                                                                      uint32_t r) {
  if constexpr (S == AdamWStateMode::kF32) {
    return x;
  } else if constexpr (S == AdamWStateMode::kBF16SR) {
    return float_to_bf16_sr(x, r);
  } else {
    return float_to_bf16_rn(x);
  }
}

// A bf16 EMA stalled: its fp32 value moved but rounded back to the stored old
// value. (Compared as floats, which keeps SIMD lanes 32-bit.)
SRKIT_HD bool adamw_stalled(float x, bf16 old, bf16 stored) {
  const float before = bf16_to_float(old);
  return (x != before) & (bf16_to_float(stored) == before);
}

// ---- the element update on arrays ---------------------------------------------

// What the caller may add to telemetry.
struct AdamWElemOut {
  float update;  // the fp32 update (before any rounding of the weight)
  float weight;  // the fp32 weight it applied to (master where there is one)
  bool m_stalled, v_stalled;
};

SRKIT_HD float adamw_load(float x) { return x; }
SRKIT_HD float adamw_load(bf16 x) { return bf16_to_float(x); }
// Stores copy the 16 bits, not the struct: GCC does not vectorize aggregate copies.
SRKIT_HD void adamw_put(bf16& slot, bf16 x) { slot.bits = x.bits; }
SRKIT_HD void adamw_put(float& slot, float x) { slot = x; }

// Stores moment x into its slot; returns whether a bf16 EMA stalled.
template <AdamWStateMode S, typename T>
SRKIT_HD bool adamw_store_state(T& slot, float x, uint32_t r) {
  const T old = slot;
  const T stored = adamw_round_state<S>(x, r);
  adamw_put(slot, stored);
  if constexpr (S == AdamWStateMode::kF32) {
    return false;
  } else {
    return adamw_stalled(x, old, stored);
  }
}

// Element i of the arrays. decay: whether the element's segment decays (the CPU
// passes a compile-time constant, which keeps the SIMD loop free of branches).
// rw, rm, rv: the element's 16 SR bits for the weight, m and v (used only by
// SR modes; pass 0 otherwise).
template <AdamWWeightMode WM, AdamWStateMode MM, AdamWStateMode VM, typename G>
SRKIT_HD AdamWElemOut adamw_element(const AdamWArrays<WM, MM, VM, G>& a, size_t i, bool decay,
                                    const AdamWHyper& h, uint32_t rw, uint32_t rm, uint32_t rv) {
  float w, comp = 0.0f;
  if constexpr (WM == AdamWWeightMode::kMasterF32) {
    w = a.master[i];
  } else if constexpr (WM == AdamWWeightMode::kRem16) {
    w = rem16_join(a.w[i], a.master[i]);
  } else {
    w = adamw_load(a.w[i]);
  }
  if constexpr (WM == AdamWWeightMode::kKahan) comp = bf16_to_float(a.kahan[i]);
  const AdamWMath r =
      adamw_math(adamw_load(a.g[i]), adamw_load(a.m[i]), adamw_load(a.v[i]), w, decay, h);
  const AdamWWeightNew n = adamw_new_weight<WM>(w, r.update, comp, rw);
  if constexpr (WM == AdamWWeightMode::kF32) {
    a.w[i] = n.w32;
  } else {
    adamw_put(a.w[i], n.w16);
  }
  if constexpr (WM == AdamWWeightMode::kMasterF32) a.master[i] = n.master;
  if constexpr (WM == AdamWWeightMode::kRem16) a.master[i] = n.rem;
  if constexpr (WM == AdamWWeightMode::kKahan) adamw_put(a.kahan[i], n.comp);
  const bool m_stalled = adamw_store_state<MM>(a.m[i], r.m, rm);
  const bool v_stalled = adamw_store_state<VM>(a.v[i], r.v, rv);
  return AdamWElemOut{r.update, w, m_stalled, v_stalled};
}

}  // namespace srkit
