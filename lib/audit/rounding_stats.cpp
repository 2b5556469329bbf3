#include "lib/audit/rounding_stats.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <stdexcept>

#include "lib/audit/byte_histogram.h"

namespace srkit::audit {
namespace {

// One-sided 99.99% point of a standard normal (chi-square via Wilson-Hilferty).
constexpr double kChiSquareZCritical = 3.719;

}  // namespace

void RoundingStats::merge(const RoundingStats& o) {
  n_ += o.n_;
  overflows_ += o.overflows_;
  n_rel_ += o.n_rel_;
  sum_ += o.sum_;
  sum_sq_ += o.sum_sq_;
  sum_abs_ += o.sum_abs_;
  sum_rel_ += o.sum_rel_;
  sum_ulps_ += o.sum_ulps_;
  sum_theory_var_ += o.sum_theory_var_;
  max_abs_ = std::max(max_abs_, o.max_abs_);
  for (int b = 0; b < kFractionBuckets; ++b) {
    bucket_n_[b] += o.bucket_n_[b];
    bucket_up_[b] += o.bucket_up_[b];
    bucket_f_[b] += o.bucket_f_[b];
    bucket_var_[b] += o.bucket_var_[b];
  }
  for (int k = 0; k < kErrorBins; ++k) err_hist_[k] += o.err_hist_[k];
}

namespace {

// Four lanes of doubles (one AVX2 register) as GCC vector types: the lanes are
// explicit, so the order of every sum is fixed by the source, not by the
// vectorizer or the vector width.
using V4d = double __attribute__((vector_size(32)));
using V4f = float __attribute__((vector_size(16)));
using V4i = int64_t __attribute__((vector_size(32)));
using V4i32 = int32_t __attribute__((vector_size(16)));
constexpr size_t kV = 4;

template <typename V, typename T>
V load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Four values in [0, 255] stored as bytes: two packs (GCC's own conversion of
// a V4i32 to bytes extracts the lanes one by one, which was add_batch's
// largest cost).
[[gnu::always_inline]] inline void store_bytes(V4i32 v, uint8_t* out) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(__m128i(v), zero), zero);
  const int32_t word = _mm_cvtsi128_si32(bytes);
  std::memcpy(out, &word, sizeof word);
}

struct LaneSums {
  V4d sum{}, sum_sq{}, sum_abs{}, max_abs{}, sum_ulps{}, sum_theory{}, sum_rel{};
  V4i count_rel{};  // minus the sum of the masks (a true mask is -1)
};

// Adds inputs i .. i + 3 of the arrays to the lanes and writes their error
// bins as bytes, kErrorBins (one past the last bin) for a non-finite q: one
// histogram then also counts the out-of-range results. Masks in integer bits
// where a select would cost more (the finite test, |e|).
// kAllFinite: every q of the batch is finite, so nothing is masked, and the
// lanes that do not depend on q come from summarize() instead.
template <bool kAllFinite>
[[gnu::always_inline]] inline void add_four(LaneSums& s, const RoundingStats::InputBatch& in,
                                            size_t i, const float* q, uint8_t* bin) {
  constexpr int kBins = RoundingStats::kErrorBins;
  const V4d zero{}, inf = zero + INFINITY;
  const V4i abs_mask = V4i{} + INT64_MAX;
  const V4d qd = __builtin_convertvector(load<V4f>(q), V4d);
  const V4d x = load<V4d>(in.x + i);
  const V4i take = kAllFinite ? V4i{} - 1 : V4d(V4i(qd) & abs_mask) < inf;
  const V4d e = kAllFinite ? qd - x : V4d(V4i(qd - x) & take);
  const V4d abs_e = V4d(V4i(e) & abs_mask);
  const V4d e_ulps = e * load<V4d>(in.inv_ulp + i);
  s.sum += e;
  s.sum_sq += e * e;
  s.sum_abs += abs_e;
  s.max_abs = abs_e > s.max_abs ? abs_e : s.max_abs;
  s.sum_ulps += e_ulps;
  s.sum_rel += e * load<V4d>(in.inv_abs_x + i);
  if constexpr (!kAllFinite) {
    s.sum_theory += V4d(V4i(load<V4d>(in.theory_var_ulp2 + i)) & take);
    s.count_rel -= take & (x != zero);
  }
  // The bin add() takes: int() of the scaled error, clamped to [0, kBins - 1]
  // (e_ulps lies in [-1, 1]; the clamp only catches its rounding). Clamping
  // the double to [0, kBins - 0.5] before the truncation gives the same bins
  // and lets the overflow bin be selected by `take` in its own lanes.
  const V4d scaled = (e_ulps + 1) * (0.5 * kBins);
  const V4d low_clamped = scaled < zero ? zero : scaled;
  const V4d top = zero + (kBins - 0.5);
  const V4d clamped = low_clamped > top ? top : low_clamped;
  const V4d bins = take ? clamped : zero + kBins;
  store_bytes(__builtin_convertvector(bins, V4i32), bin);
}

}  // namespace

void RoundingStats::InputBatch::summarize(size_t n) {
  if (n > kMax) throw std::logic_error("RoundingStats::InputBatch: more than kMax inputs");
  std::fill(std::begin(bucket_n), std::end(bucket_n), 0);
  std::fill(std::begin(bucket_f), std::end(bucket_f), 0.0);
  std::fill(std::begin(bucket_var), std::end(bucket_var), 0.0);
  for (size_t i = 0; i < n; ++i) {
    ++bucket_n[bucket[i]];
    bucket_f[bucket[i]] += f[i];
    bucket_var[bucket[i]] += theory_var[i];
  }
  std::fill(bucket + n, bucket + kMax, uint8_t(0xff));
  // The same sums add_four takes lane by lane (input i in lane i % kLanes).
  static_assert(kLanes == kV);
  V4d theory{};
  V4i nonzero{};  // minus the count (a true mask is -1)
  size_t i = 0;
  for (; i + kV <= n; i += kV) {
    theory += load<V4d>(theory_var_ulp2 + i);
    nonzero += load<V4d>(x + i) != V4d{};
  }
  for (size_t l = 0; l < kV; ++l) {
    theory_lanes[l] = i + l < n ? theory[l] + theory_var_ulp2[i + l] : theory[l];
    nonzero_lanes[l] = uint64_t(-nonzero[l]) + (i + l < n && x[i + l] != 0);
  }
  summarized = n;
}

void RoundingStats::add_batch(const InputBatch& in, const float* q, const uint8_t* up) {
  static_assert(kLanes == kV && InputBatch::kMax == kByteHistogramBlock);
  static_assert(kErrorBins < 0xff && kFractionBuckets < 0xff);
  const size_t n = in.summarized;
  LaneSums lanes;
  // Error bins of the batch; past n, 0xff (counted nowhere).
  alignas(64) uint8_t bin[InputBatch::kMax];
  uint32_t largest = 0;  // of the |q| bits: below Inf's when all are finite
  for (size_t j = 0; j < n; ++j)
    largest = std::max(largest, std::bit_cast<uint32_t>(q[j]) & 0x7fffffffu);
  const bool all_finite = largest < 0x7f800000u;
  size_t i = 0;
  if (all_finite) {
    for (; i + kV <= n; i += kV) add_four<true>(lanes, in, i, q + i, bin + i);
  } else {
    for (; i + kV <= n; i += kV) add_four<false>(lanes, in, i, q + i, bin + i);
  }
  if (i < n) {
    // The last 1-3 inputs, padded with a non-finite q (which adds nothing to
    // the lanes; its bins are overwritten below).
    InputBatch tail;
    float q_tail[kV] = {NAN, NAN, NAN, NAN};
    for (size_t k = 0; k < kV; ++k) {
      const bool real = i + k < n;
      tail.set(k, real ? in.x[i + k] : 0.0, real ? in.f[i + k] : 0.0, real ? in.ulp[i + k] : 1.0);
      if (real) q_tail[k] = q[i + k];
    }
    add_four<false>(lanes, tail, 0, q_tail, bin + i);
  }
  std::fill(bin + n, bin + InputBatch::kMax, uint8_t(0xff));
  if (all_finite) {
    // Nothing masked: the batch's own lanes, the tail's inputs included.
    for (size_t l = 0; l < kV; ++l) {
      lanes.sum_theory[l] = in.theory_lanes[l];
      lanes.count_rel[l] = int64_t(in.nonzero_lanes[l]);
    }
  }
  for (size_t l = 0; l < kV; ++l) {
    n_rel_ += uint64_t(lanes.count_rel[l]);
    sum_ += lanes.sum[l];
    sum_sq_ += lanes.sum_sq[l];
    sum_abs_ += lanes.sum_abs[l];
    max_abs_ = std::max(max_abs_, lanes.max_abs[l]);
    sum_ulps_ += lanes.sum_ulps[l];
    sum_theory_var_ += lanes.sum_theory[l];
    sum_rel_ += lanes.sum_rel[l];
  }
  // Both histograms by vector compares (byte_histogram.h): the error bins,
  // whose extra bin counts the non-finite results, and the round-ups per
  // fraction bucket, weighted by up (bytes past n are padding: the buckets
  // there are 0xff and match nothing).
  alignas(64) uint8_t ups[InputBatch::kMax] = {};
  std::memcpy(ups, up, n);
  uint32_t bins[kErrorBins + 1] = {}, ups_per_bucket[kFractionBuckets] = {};
  add_byte_histogram(bin, kErrorBins + 1, bins);
  add_weighted_byte_histogram(in.bucket, ups, kFractionBuckets, ups_per_bucket);
  for (int k = 0; k < kErrorBins; ++k) err_hist_[k] += bins[k];
  for (int b = 0; b < kFractionBuckets; ++b) bucket_up_[b] += ups_per_bucket[b];
  const uint64_t non_finite = bins[kErrorBins];  // 0 exactly when all_finite
  n_ += n - non_finite;
  overflows_ += non_finite;
  // The per-bucket sums of the finite inputs: the batch's own summary when
  // every q is finite (all but batches holding an out-of-range input).
  if (all_finite) {
    for (int b = 0; b < kFractionBuckets; ++b) {
      bucket_n_[b] += in.bucket_n[b];
      bucket_f_[b] += in.bucket_f[b];
      bucket_var_[b] += in.bucket_var[b];
    }
    return;
  }
  // Otherwise input by input; a non-finite result's round-up is taken back.
  for (size_t j = 0; j < n; ++j) {
    const int b = in.bucket[j];
    if (bin[j] == kErrorBins) {
      bucket_up_[b] -= up[j] != 0;
      continue;
    }
    ++bucket_n_[b];
    bucket_f_[b] += in.f[j];
    bucket_var_[b] += in.theory_var[j];
  }
}

double RoundingStats::mean_error() const { return n_ ? sum_ / double(n_) : 0.0; }

double RoundingStats::error_variance() const {
  if (n_ == 0) return 0.0;
  const double mean = mean_error();
  return std::max(0.0, sum_sq_ / double(n_) - mean * mean);
}

double RoundingStats::variance_ratio() const {
  return sum_theory_var_ > 0 ? error_variance() * double(n_) / sum_theory_var_ : 0.0;
}

double RoundingStats::z_score() const {
  if (n_ < 2) return 0.0;
  const double mean = mean_error();
  const double se = std::sqrt(error_variance() / double(n_));
  if (se == 0) return mean == 0 ? 0.0 : std::copysign(INFINITY, mean);
  return mean / se;
}

double RoundingStats::relative_bias() const { return n_rel_ ? sum_rel_ / double(n_rel_) : 0.0; }

double RoundingStats::mean_abs_error() const { return n_ ? sum_abs_ / double(n_) : 0.0; }

double RoundingStats::calibration_error() const {
  if (n_ == 0) return 0.0;
  double weighted = 0;
  for (int b = 0; b < kFractionBuckets; ++b) {
    if (bucket_n_[b] == 0) continue;
    weighted += double(bucket_n_[b]) * std::fabs(bucket_p_up(b) - bucket_mean_f(b));
  }
  return weighted / double(n_);
}

double RoundingStats::chi_square() const {
  double chi2 = 0;
  for (int b = 0; b < kFractionBuckets; ++b) {
    if (bucket_var_[b] <= 0) continue;
    const double d = double(bucket_up_[b]) - bucket_f_[b];
    chi2 += d * d / bucket_var_[b];
  }
  return chi2;
}

int RoundingStats::chi_square_dof() const {
  int dof = 0;
  for (int b = 0; b < kFractionBuckets; ++b) dof += bucket_var_[b] > 0;
  return dof;
}

double RoundingStats::chi_square_z() const {
  const int k = chi_square_dof();
  if (k == 0) return 0.0;
  const double h = 2.0 / (9.0 * k);
  return (std::cbrt(chi_square() / k) - (1 - h)) / std::sqrt(h);
}

bool RoundingStats::unbiased() const { return std::fabs(z_score()) < kBiasZCritical; }
bool RoundingStats::calibrated() const { return chi_square_z() < kChiSquareZCritical; }

std::string RoundingStats::verdict(const std::string& mode) const {
  char bias[96], cal[128];
  if (unbiased()) {
    std::snprintf(bias, sizeof bias, "unbiased at 99.99%% (|z| = %.3g < %.3g)",
                  std::fabs(z_score()), kBiasZCritical);
  } else {
    std::snprintf(bias, sizeof bias, "biased (z = %.4g, |z| >= %.3g)", z_score(), kBiasZCritical);
  }
  std::snprintf(cal, sizeof cal, "P(up) = f: chi2 = %.4g with %d dof, %s at 99.99%%", chi_square(),
                chi_square_dof(), calibrated() ? "consistent" : "rejected");
  return mode + ": " + bias + "; " + cal;
}

double RoundingStats::bucket_mean_f(int b) const {
  return bucket_n_[b] ? bucket_f_[b] / double(bucket_n_[b]) : NAN;
}

double RoundingStats::bucket_p_up(int b) const {
  return bucket_n_[b] ? double(bucket_up_[b]) / double(bucket_n_[b]) : NAN;
}

}  // namespace srkit::audit
