#include "lib/audit/rounding_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <stdexcept>

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
constexpr size_t kV = 4;

template <typename V, typename T>
V load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

struct LaneSums {
  V4d sum{}, sum_sq{}, sum_abs{}, max_abs{}, sum_ulps{}, sum_theory{}, sum_rel{};
  V4i count{}, count_rel{};  // minus the sum of the masks (a true mask is -1)
};

// Adds inputs i .. i + 3 of the arrays to the lanes; writes their error bins and
// whether each q was finite.
[[gnu::always_inline]] inline void add_four(LaneSums& s, const RoundingStats::InputBatch& in,
                                            size_t i, const float* q, int bins, int* bin,
                                            uint8_t* finite) {
  const V4d zero{}, inf = zero + INFINITY;
  const V4d qd = __builtin_convertvector(load<V4f>(q), V4d);
  const V4d x = load<V4d>(in.x + i), ulp = load<V4d>(in.ulp + i);
  const V4i take = (qd < zero ? -qd : qd) < inf;
  const V4d e = take ? qd - x : zero;
  const V4d abs_e = e < zero ? -e : e;
  const V4d e_ulps = e * load<V4d>(in.inv_ulp + i);
  s.sum += e;
  s.sum_sq += e * e;
  s.sum_abs += abs_e;
  s.max_abs = abs_e > s.max_abs ? abs_e : s.max_abs;
  s.sum_ulps += e_ulps;
  s.sum_theory += take ? load<V4d>(in.theory_var + i) * ulp * ulp : zero;
  s.sum_rel += e * load<V4d>(in.inv_abs_x + i);
  s.count -= take;
  s.count_rel -= take & (x != zero);
  const V4d scaled = (e_ulps + 1) * (0.5 * bins);  // e_ulps in [-1, 1]
  for (size_t l = 0; l < kV; ++l) {
    const int k = int(scaled[l]);
    bin[l] = std::clamp(k, 0, bins - 1);
    finite[l] = uint8_t(take[l] != 0);
  }
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
  summarized = n;
}

void RoundingStats::add_batch(const InputBatch& in, const float* q, const uint8_t* up) {
  static_assert(kLanes == kV);
  const size_t n = in.summarized;
  LaneSums lanes;
  alignas(64) int bin[InputBatch::kMax];
  alignas(64) uint8_t finite[InputBatch::kMax];
  size_t i = 0;
  for (; i + kV <= n; i += kV) add_four(lanes, in, i, q + i, kErrorBins, bin + i, finite + i);
  if (i < n) {
    // The last 1-3 inputs, padded with a non-finite q (which adds nothing to
    // the lanes; the histograms below stop at n).
    InputBatch tail;
    float q_tail[kV] = {NAN, NAN, NAN, NAN};
    for (size_t k = 0; k < kV; ++k) {
      const bool real = i + k < n;
      tail.set(k, real ? in.x[i + k] : 0.0, real ? in.f[i + k] : 0.0, real ? in.ulp[i + k] : 1.0);
      if (real) q_tail[k] = q[i + k];
    }
    add_four(lanes, tail, 0, q_tail, kErrorBins, bin + i, finite + i);
  }
  for (size_t l = 0; l < kV; ++l) {
    n_ += uint64_t(lanes.count[l]);
    n_rel_ += uint64_t(lanes.count_rel[l]);
    sum_ += lanes.sum[l];
    sum_sq_ += lanes.sum_sq[l];
    sum_abs_ += lanes.sum_abs[l];
    max_abs_ = std::max(max_abs_, lanes.max_abs[l]);
    sum_ulps_ += lanes.sum_ulps[l];
    sum_theory_var_ += lanes.sum_theory[l];
    sum_rel_ += lanes.sum_rel[l];
  }
  // The histograms scatter by bucket and bin, in input order. When every q is
  // finite (all but batches holding an out-of-range input), the inputs' own
  // per-bucket sums are the batch's summary.
  const bool all_finite = std::all_of(finite, finite + n, [](uint8_t v) { return v != 0; });
  if (all_finite) {
    for (int b = 0; b < kFractionBuckets; ++b) {
      bucket_n_[b] += in.bucket_n[b];
      bucket_f_[b] += in.bucket_f[b];
      bucket_var_[b] += in.bucket_var[b];
    }
  }
  // Counts go to kV interleaved copies of the histograms (input i to copy
  // i % kV), so that runs of one bin do not chain increments of one counter.
  uint32_t err_copies[kV][kErrorBins] = {}, up_copies[kV][kFractionBuckets] = {};
  for (size_t i = 0; i < n; ++i) {
    if (!finite[i]) {
      ++overflows_;
      continue;
    }
    const int b = in.bucket[i];
    up_copies[i % kV][b] += up[i];
    ++err_copies[i % kV][bin[i]];
    if (!all_finite) {
      ++bucket_n_[b];
      bucket_f_[b] += in.f[i];
      bucket_var_[b] += in.theory_var[i];
    }
  }
  for (size_t c = 0; c < kV; ++c) {
    for (int k = 0; k < kErrorBins; ++k) err_hist_[k] += err_copies[c][k];
    for (int b = 0; b < kFractionBuckets; ++b) bucket_up_[b] += up_copies[c][b];
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
