// Streaming statistics of one rounding mode's errors, for sr-audit. Format
// neutral: callers pass each input x, its rounded value q, the fractional
// position f of x between its two neighbours (0 = exact, toward 1 = next to
// the neighbour away from zero), whether q is that neighbour ("up") and the
// gap (ulp, a power of two) between the neighbours. So every format's audit
// shares these accumulators. Memory is fixed (no per-sample storage): N is
// unbounded.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

namespace srkit::audit {

// Two-sided normal quantile of the verdicts: |z| < 3.8906 holds with
// probability 99.99% for an unbiased rounding.
constexpr double kBiasZCritical = 3.8906;

// 1 / p for p a power of two in [2^-1022, 2^1022], exactly, without a
// division: the exponent's bits negated (the bits of 2^k are (1023 + k) << 52,
// those of 2^-k are (1023 - k) << 52). Every gap between neighbours of a
// binary format is such a power.
inline double inverse_of_power_of_two(double p) {
  return std::bit_cast<double>((uint64_t(2046) << 52) - std::bit_cast<uint64_t>(p));
}

class RoundingStats {
 public:
  static constexpr int kFractionBuckets = 16;
  // Histogram of the error in ulps over [-1, 1] (every mode's error lies there).
  static constexpr int kErrorBins = 40;
  // add_batch's interleaved partial sums (below).
  static constexpr size_t kLanes = 4;

  // The quantities of one input that every mode's add() shares: computed once
  // per input, not once per mode.
  struct Input {
    double x, f, ulp, inv_ulp, inv_abs_x, theory_var;  // inv_abs_x = 0 for x = 0
    int bucket;
    static Input make(double x, double f, double ulp) {
      const int b = std::min(kFractionBuckets - 1, int(f * kFractionBuckets));
      // 1/|x| is +Inf at x = 0, masked to 0 with integer bits: no branch (nor
      // a select the compiler turns into one) around the division, so that
      // loops over inputs vectorize.
      const double abs_x = std::fabs(x);
      const uint64_t keep = 0 - uint64_t(abs_x != 0);
      const double inv_abs_x = std::bit_cast<double>(std::bit_cast<uint64_t>(1 / abs_x) & keep);
      return Input{x, f, ulp, inverse_of_power_of_two(ulp), inv_abs_x, f * (1 - f), b};
    }
  };

  // Input for many inputs at once, as arrays (structure of arrays), so that
  // add_batch's sums run across SIMD lanes. Fill entries 0 .. n-1 with set(),
  // then call summarize(n) once: the per-bucket sums it takes are the same for
  // every mode that rounds these inputs, so each mode's add_batch adds them
  // whole instead of scattering them input by input.
  struct InputBatch {
    static constexpr size_t kMax = 256;
    alignas(64) double x[kMax], f[kMax], ulp[kMax], inv_ulp[kMax], inv_abs_x[kMax],
        theory_var[kMax], theory_var_ulp2[kMax];  // theory_var * ulp * ulp, as add() forms it
    // Fraction bucket of each input as a byte; summarize(n) sets entries n ..
    // kMax - 1 to 0xff (no bucket), so histograms can run over whole vectors.
    alignas(64) uint8_t bucket[kMax];
    size_t summarized = 0;  // the n of the last summarize()
    uint64_t bucket_n[kFractionBuckets];
    double bucket_f[kFractionBuckets], bucket_var[kFractionBuckets];
    // add_batch's lane sums that do not depend on the rounding, for batches
    // whose results are all finite: theory_var_ulp2 and the count of x != 0,
    // input i in lane i % kLanes, in input order.
    double theory_lanes[kLanes];
    uint64_t nonzero_lanes[kLanes];

    void set(size_t i, double xi, double fi, double ulpi) {
      const Input in = Input::make(xi, fi, ulpi);
      x[i] = in.x, f[i] = in.f, ulp[i] = in.ulp, inv_ulp[i] = in.inv_ulp;
      inv_abs_x[i] = in.inv_abs_x, theory_var[i] = in.theory_var, bucket[i] = uint8_t(in.bucket);
      theory_var_ulp2[i] = in.theory_var * in.ulp * in.ulp;
    }
    void summarize(size_t n);
  };

  void add(double x, double q, double f, bool up, double ulp) {
    add(Input::make(x, f, ulp), q, up);
  }
  inline void add(const Input& in, double q, bool up);
  // add(input i, q[i], up[i]) for i in [0, n), n = in.summarized, except
  // that the sums are taken in kLanes interleaved partial sums (element i in
  // lane i % kLanes) that are added in lane order at the end of the batch: the
  // same statistics up to rounding, in a fixed order (so still the same bits
  // for any thread count), at SIMD speed. A non-finite q[i] counts as out of
  // range, like add(). Each up[i] is 0 or 1.
  void add_batch(const InputBatch& in, const float* q, const uint8_t* up);
  // An input outside the format's finite range, or a result that overflowed to
  // +-Inf: counted apart and left out of every other statistic.
  void add_out_of_range() { ++overflows_; }
  // Appends another accumulator's samples; merging in a fixed order gives the
  // same bits whatever the thread count.
  void merge(const RoundingStats& other);

  uint64_t count() const { return n_; }
  uint64_t overflows() const { return overflows_; }
  // Mean signed error q - x (the bias).
  double mean_error() const;
  // Mean signed error in ulps of each input (comparable across exponents).
  double mean_error_ulps() const { return n_ ? sum_ulps_ / double(n_) : 0.0; }
  // Bias over its standard error: |z| beyond kBiasZCritical means a real bias.
  double z_score() const;
  // Mean of (q - x) / |x| over x != 0.
  double relative_bias() const;
  double mean_abs_error() const;
  double max_abs_error() const { return max_abs_; }
  // Mean squared error and the error's (population) variance.
  double mse() const { return n_ ? sum_sq_ / double(n_) : 0.0; }
  double error_variance() const;
  // Error variance over the mean of f(1-f) ulp^2, the variance of unbiased SR
  // on the same inputs: ~1 for SR. 0 when every input was exact.
  double variance_ratio() const;
  // Mean over samples of |P(up | bucket) - mean f in bucket|, with f cut into
  // kFractionBuckets equal buckets: ~0 when P(up) = f (unbiased SR), ~0.25 for
  // round-to-nearest, ~0.5 for truncation.
  double calibration_error() const;
  // Chi-square of the round-up counts per fraction bucket against the ideal
  // P(up) = f: sum over buckets of (ups - sum f)^2 / sum f(1-f), each term a
  // squared standard normal under the ideal (sum of independent Bernoullis).
  // Degrees of freedom = buckets with a non-zero variance.
  double chi_square() const;
  int chi_square_dof() const;
  // Wilson-Hilferty normal score of chi_square(): > 3.719 rejects P(up) = f
  // at 99.99% (one-sided).
  double chi_square_z() const;
  bool unbiased() const;
  bool calibrated() const;
  // "SR: unbiased at 99.99% (|z| = 0.8 < 3.89); P(up) = f: chi2 = 4.1 (5 dof), consistent".
  std::string verdict(const std::string& mode) const;

  // Per bucket: samples, mean f and observed P(up) (NaN when empty).
  uint64_t bucket_count(int b) const { return bucket_n_[b]; }
  double bucket_mean_f(int b) const;
  double bucket_p_up(int b) const;
  // Samples whose error / ulp fell in bin k of [-1, 1].
  uint64_t error_bin(int k) const { return err_hist_[k]; }

 private:
  uint64_t n_ = 0, overflows_ = 0, n_rel_ = 0;
  double sum_ = 0, sum_sq_ = 0, sum_abs_ = 0, sum_rel_ = 0, max_abs_ = 0, sum_ulps_ = 0;
  double sum_theory_var_ = 0;  // sum of f(1-f) ulp^2
  uint64_t bucket_n_[kFractionBuckets] = {}, bucket_up_[kFractionBuckets] = {};
  double bucket_f_[kFractionBuckets] = {}, bucket_var_[kFractionBuckets] = {};
  uint64_t err_hist_[kErrorBins] = {};
};

// Inline: the cast audit calls it three times per sample.
inline void RoundingStats::add(const Input& in, double q, bool up) {
  if (!std::isfinite(q)) {
    ++overflows_;
    return;
  }
  const double e = q - in.x;
  const double abs_e = std::fabs(e);
  ++n_;
  sum_ += e;
  sum_sq_ += e * e;
  sum_abs_ += abs_e;
  max_abs_ = std::max(max_abs_, abs_e);
  const double e_ulps = e * in.inv_ulp;
  sum_ulps_ += e_ulps;
  sum_theory_var_ += in.theory_var * in.ulp * in.ulp;
  sum_rel_ += e * in.inv_abs_x;
  n_rel_ += in.x != 0;
  ++bucket_n_[in.bucket];
  bucket_up_[in.bucket] += up;
  bucket_f_[in.bucket] += in.f;
  bucket_var_[in.bucket] += in.theory_var;
  const int k = int((e_ulps + 1) * (0.5 * kErrorBins));
  ++err_hist_[std::clamp(k, 0, kErrorBins - 1)];
}

}  // namespace srkit::audit
