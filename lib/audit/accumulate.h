// The accumulation audit behind `sr-audit accumulate`: x += delta repeated n
// times with x stored in a narrow format, against the exact sum. Methods:
//   fp32   x kept in fp32 (the reference a master copy would give),
//   RN     x stored in the format, each sum rounded to nearest even,
//   SR     each sum stochastically rounded (repeated with independent bits),
//   Kahan  x and its compensation both stored in the format with RN.
// RN stalls once delta < ulp(x)/2 (the update is erased every step), so its
// error grows like n; SR's error is a random walk of n steps of at most one
// ulp, so it grows like sqrt(n) and shrinks relative to the sum.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/fp_formats.h"
#include "kernels/common/sr_bits.h"

namespace srkit::audit {

enum class AccumMethod { kFp32 = 0, kRN = 1, kSR = 2, kKahan = 3 };
constexpr int kAccumMethods = 4;
const char* accum_method_name(AccumMethod m);

// Parses a comma-separated list such as "bf16,fp16" or "all"; throws
// std::invalid_argument naming `flag` on an unknown or empty name.
std::vector<FpFormat> parse_format_list(const std::string& text, const std::string& flag);

struct AccumulateConfig {
  FpFormat format = FpFormat::kBf16;
  double x0 = 1.0;     // start value (rounded to the format first)
  double delta = 0.0;  // added every step, as an fp32 value
  uint64_t steps = 10000;
  uint32_t repeats = 16;  // independent SR runs (the other methods are deterministic)
  uint64_t seed = 1;
  int trace_points = 0;  // trajectory samples kept per method (0: none)
};

// SR bits of repeat r at step t: sr_bits16(seed, kAccumulatePurpose, t, r).
constexpr RngPurpose kAccumulatePurpose = RngPurpose::kUser;

struct MethodResult {
  AccumMethod method = AccumMethod::kFp32;
  double final_value = 0;     // SR: mean over repeats
  double rel_error = 0;       // (final - exact) / exact; SR: mean over repeats
  double rel_error_std = 0;   // SR: standard deviation over repeats; else 0
  double rms_error_ulps = 0;  // sqrt(mean (final - exact)^2) / ulp(x0)
  int64_t stall_step = -1;    // first step whose sum rounded back to x (-1: never)
  double stall_value = 0;
  std::vector<double> trace;  // (x - exact) / ulp(x0) at AccumulateResult::trace_steps
};

struct AccumulateResult {
  AccumulateConfig config;
  double x0 = 0;     // x0 as stored in the format
  double delta = 0;  // delta as an fp32 value
  double exact = 0;  // x0 + steps * delta
  double ulp0 = 0;   // the format's ulp at x0
  std::vector<uint64_t> trace_steps;
  std::vector<MethodResult> methods;  // in AccumMethod order
};

// Throws std::invalid_argument naming the flag (-n/--steps, --repeats, --delta,
// --x0) when a setting is unusable: zero counts, non-finite or zero delta, or a
// sum that would leave the format's finite range.
void validate(const AccumulateConfig& c);

AccumulateResult run_accumulate(const AccumulateConfig& c);

// delta = ratio * ulp(x0) for each ratio: log-spaced from ratio_min to
// ratio_max, points_per_decade per factor of 10, both ends included.
std::vector<double> sweep_ratios(double ratio_min, double ratio_max, int points_per_decade);

// Markdown tables: one row per (format, method), and the sweep with one row
// per (format, ratio).
std::string markdown_table(const std::vector<AccumulateResult>& runs);
std::string sweep_markdown_table(const std::vector<AccumulateResult>& runs);

}  // namespace srkit::audit
