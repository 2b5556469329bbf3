// The fp32 -> narrow-format cast audit behind `sr-audit cast`: draw N inputs,
// round each to one format (bf16, fp16, fp8 e4m3 or e5m2) with RN, SR and RZ
// (the biased reference), and collect RoundingStats per mode.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/fp_formats.h"
#include "lib/audit/distribution.h"
#include "lib/audit/rounding_stats.h"

namespace srkit::audit {

struct CastAuditConfig {
  FpFormat format = FpFormat::kBf16;
  DistParams dist;
  uint64_t samples = 10'000'000;
  uint64_t seed = 1;
};

struct NamedStats {
  std::string format;
  std::string mode;  // "RN", "SR" or "RZ"
  RoundingStats stats;
};

// Throws std::invalid_argument naming the flag (-n/--samples, distribution
// flags) on bad settings.
void validate(const CastAuditConfig& c);

// Runs on the current OpenMP threads; the result is the same for any count.
// Inputs come in fixed chunks and their statistics are merged in chunk order.
// SR draws element i's bits from the contract (seed, kCast, step 0, i), the
// bits the training casts would use. Inputs beyond the format's largest
// finite value are counted as out of range (overflows()) in every mode.
std::vector<NamedStats> run_cast_audit(const CastAuditConfig& c);

// Where finite x lies between its two neighbours in `format`: the gap (ulp),
// the magnitude of the neighbour toward zero, and the fraction f in [0, 1).
struct Bracket {
  double ulp, low_magnitude, f;
};
Bracket bracket(FpFormat format, float x);

// The fraction f of finite x between low (the magnitude of its neighbour
// toward zero) and low + ulp. Exact: the difference is exact in double, and
// so is its product with the inverse of the power of two ulp.
inline double fraction_above(float x, float low, float ulp) {
  return (std::fabs(double(x)) - double(low)) * inverse_of_power_of_two(double(ulp));
}

// Whether q is the neighbour away from zero.
inline bool rounded_up(const Bracket& b, float q) { return std::fabs(double(q)) > b.low_magnitude; }

// Adds one rounding q of x.
void add_rounding(RoundingStats& s, const Bracket& b, float x, float q);

// Markdown table, one row per (format, mode), and one verdict line per row.
std::string markdown_table(const std::vector<NamedStats>& rows);
std::string verdicts(const std::vector<NamedStats>& rows);

}  // namespace srkit::audit
