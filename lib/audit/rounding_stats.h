// Streaming statistics of one rounding mode's errors, for sr-audit. Format
// neutral: callers pass each input x, its rounded value q, the fractional
// position f of x between its two neighbours (0 = exact, toward 1 = next to
// the neighbour away from zero) and whether q is that neighbour ("up"). So the
// bf16 cast audit and later fp16/fp8 audits share these accumulators.
#pragma once

#include <cstdint>

namespace srkit::audit {

class RoundingStats {
 public:
  static constexpr int kFractionBuckets = 16;

  void add(double x, double q, double f, bool up);
  // Appends another accumulator's samples; merging in a fixed order gives the
  // same bits whatever the thread count.
  void merge(const RoundingStats& other);

  uint64_t count() const { return n_; }
  // Results that overflowed to +-Inf (x was finite): left out of the error sums.
  uint64_t overflows() const { return overflows_; }
  // Mean signed error q - x (the bias).
  double mean_error() const;
  // Bias over its standard error: |z| beyond ~4 means a real bias.
  double z_score() const;
  // Mean of (q - x) / |x| over x != 0.
  double relative_bias() const;
  double mean_abs_error() const;
  double max_abs_error() const { return max_abs_; }
  // Mean over samples of |P(up | bucket) - mean f in bucket|, with f cut into
  // kFractionBuckets equal buckets: ~0 when P(up) = f (unbiased SR), ~0.25 for
  // round-to-nearest, ~0.5 for truncation.
  double calibration_error() const;

 private:
  uint64_t n_ = 0, overflows_ = 0, n_rel_ = 0;
  double sum_ = 0, sum_sq_ = 0, sum_abs_ = 0, sum_rel_ = 0, max_abs_ = 0;
  uint64_t bucket_n_[kFractionBuckets] = {}, bucket_up_[kFractionBuckets] = {};
  double bucket_f_[kFractionBuckets] = {};
};

}  // namespace srkit::audit
