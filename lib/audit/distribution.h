// Input distributions for the rounding audits. Sample i is a pure function of
// (seed, i): drawn from Philox under a purpose no kernel uses, so audits are
// reproducible, need no buffers of N values, and do not depend on threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/fp_formats.h"

namespace srkit::audit {

// kGrid: inputs at chosen fractional positions f between two neighbours of
// the target format, x = 2^e (1 + (k + f) 2^-man) with e uniform over the
// integer exponents in [emin, emax) (clipped to the format's normal binades
// below its top one, so nothing overflows or goes subnormal), k a uniform
// mantissa code and f cycling through `fractions` (sample i takes fraction
// i % count, so each gets the same share).
enum class Dist { kUniform, kNormal, kLogUniform, kGrid };

// Parses "uniform" | "normal" | "loguniform" | "grid"; throws std::invalid_argument.
Dist parse_dist(const std::string& name);
const char* dist_name(Dist d);

struct DistParams {
  Dist dist = Dist::kUniform;
  double a = 0.0, b = 1.0;         // uniform on [a, b)
  double mu = 0.0, sigma = 1.0;    // normal
  double emin = -8.0, emax = 8.0;  // loguniform: |x| = 2^u, u uniform on [emin, emax)
  std::vector<double> fractions = {0.1, 0.25, 0.5, 0.75, 0.9};  // grid
};

// "0.1,0.25,0.5" -> values; throws std::invalid_argument naming --fractions on
// text that is not a comma-separated list of numbers in (0, 1).
std::vector<double> parse_fractions(const std::string& text);

// The grid's exponent range [lo, hi) for `format`; throws std::invalid_argument
// naming --emin/--emax when it is empty.
void grid_exponents(const DistParams& p, FpFormat format, int* lo, int* hi);

// Throws std::invalid_argument naming the flag (--a/--b, --sigma, --emin/--emax,
// --fractions)
// when the parameters are unusable or could leave the finite float range.
void validate(const DistParams& p);

// "uniform(a=0, b=1)" and the like, for report headers.
std::string describe(const DistParams& p);

// Sample i of the distribution, as a float (the value the cast sees). Only the
// grid depends on the target format (its neighbours).
float sample(const DistParams& p, uint64_t seed, uint64_t index, FpFormat format = FpFormat::kBf16);

// The samples of one (distribution, seed, format), many at a time, equal to
// sample()'s: the distribution's setup is done once, and the Philox blocks come
// 32 at a time from the CPU's vectorized generator (kernels/cpu/philox_simd.h)
// instead of one scalar block per sample. Throws like validate() and
// grid_exponents() on unusable parameters.
class Sampler {
 public:
  Sampler(const DistParams& p, uint64_t seed, FpFormat format);
  // x[k] = sample(p, seed, first + k, format) for k in [0, n).
  void fill(uint64_t first, size_t n, float* x) const;

  struct Setup {
    int grid_lo = 0, grid_hi = 0, grid_man = 0;  // the grid's exponents and mantissa bits
  };

 private:
  DistParams params_;
  uint64_t seed_;
  Setup setup_;
};

}  // namespace srkit::audit
