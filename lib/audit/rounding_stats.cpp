#include "lib/audit/rounding_stats.h"

#include <algorithm>
#include <cmath>

namespace srkit::audit {

void RoundingStats::add(double x, double q, double f, bool up) {
  if (!std::isfinite(q)) {
    ++overflows_;
    return;
  }
  const double e = q - x;
  ++n_;
  sum_ += e;
  sum_sq_ += e * e;
  sum_abs_ += std::fabs(e);
  max_abs_ = std::max(max_abs_, std::fabs(e));
  if (x != 0) {
    sum_rel_ += e / std::fabs(x);
    ++n_rel_;
  }
  const int b = std::min(kFractionBuckets - 1, int(f * kFractionBuckets));
  ++bucket_n_[b];
  bucket_up_[b] += up;
  bucket_f_[b] += f;
}

void RoundingStats::merge(const RoundingStats& o) {
  n_ += o.n_;
  overflows_ += o.overflows_;
  n_rel_ += o.n_rel_;
  sum_ += o.sum_;
  sum_sq_ += o.sum_sq_;
  sum_abs_ += o.sum_abs_;
  sum_rel_ += o.sum_rel_;
  max_abs_ = std::max(max_abs_, o.max_abs_);
  for (int b = 0; b < kFractionBuckets; ++b) {
    bucket_n_[b] += o.bucket_n_[b];
    bucket_up_[b] += o.bucket_up_[b];
    bucket_f_[b] += o.bucket_f_[b];
  }
}

double RoundingStats::mean_error() const { return n_ ? sum_ / double(n_) : 0.0; }

double RoundingStats::z_score() const {
  if (n_ < 2) return 0.0;
  const double mean = mean_error();
  const double var = std::max(0.0, sum_sq_ / double(n_) - mean * mean);
  const double se = std::sqrt(var / double(n_));
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
    const double p_up = double(bucket_up_[b]) / double(bucket_n_[b]);
    const double f_mean = bucket_f_[b] / double(bucket_n_[b]);
    weighted += double(bucket_n_[b]) * std::fabs(p_up - f_mean);
  }
  return weighted / double(n_);
}

}  // namespace srkit::audit
