#include "lib/audit/rounding_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

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
