#include "lib/audit/distribution.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "kernels/common/sr_bits.h"
#include "kernels/cpu/philox_simd.h"
#include "lib/util/format.h"

namespace srkit::audit {
namespace {

// A double in [0, 1) from two 32-bit words (53 random bits).
double unit(uint32_t hi, uint32_t lo) {
  const uint64_t bits53 = (uint64_t(hi) << 21) ^ (uint64_t(lo) >> 11);
  return double(bits53) * 0x1p-53;
}

constexpr double kTwoPi = 6.283185307179586476925286766559;

// Box-Muller needs -log(1 - u) with u < 1 - 2^-53: |z| <= sqrt(2 * 53 ln 2) < 8.6.
constexpr double kMaxNormalZ = 8.6;

}  // namespace

Dist parse_dist(const std::string& name) {
  if (name == "uniform") return Dist::kUniform;
  if (name == "normal") return Dist::kNormal;
  if (name == "loguniform") return Dist::kLogUniform;
  if (name == "grid") return Dist::kGrid;
  throw std::invalid_argument("--dist: unknown distribution '" + name +
                              "' (expected uniform, normal, loguniform or grid)");
}

std::vector<double> parse_fractions(const std::string& text) {
  const std::string expected =
      "--fractions: expected comma-separated numbers in (0, 1) such as 0.1,0.5, got '" + text + "'";
  std::vector<double> out;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find(',', begin);
    const std::string item = text.substr(begin, end == std::string::npos ? end : end - begin);
    char* stop = nullptr;
    const double v = item.empty() ? NAN : std::strtod(item.c_str(), &stop);
    if (item.empty() || *stop != '\0' || !(v > 0 && v < 1)) throw std::invalid_argument(expected);
    out.push_back(v);
    if (end == std::string::npos) return out;
    begin = end + 1;
  }
}

void grid_exponents(const DistParams& p, FpFormat format, int* lo, int* hi) {
  // The format's shape from its ulps: 2^-man at 1, 2^(emin - man) at 0.
  const int man = -std::ilogb(fp_format_ulp(format, 1.0f));
  const int min_normal = std::ilogb(fp_format_ulp(format, 0.0f)) + man;
  const int top = std::ilogb(fp_format_max(format));  // binade of the largest finite value
  *lo = std::max(int(std::ceil(p.emin)), min_normal);
  *hi = std::min(int(std::floor(p.emax)), top);
  if (*lo >= *hi) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "--emin/--emax: the grid needs whole exponents within %s's normal range "
                  "[%d, %d), got [%g, %g)",
                  fp_format_name(format), min_normal, top, p.emin, p.emax);
    throw std::invalid_argument(buf);
  }
}

const char* dist_name(Dist d) {
  switch (d) {
    case Dist::kUniform:
      return "uniform";
    case Dist::kNormal:
      return "normal";
    case Dist::kLogUniform:
      return "loguniform";
    case Dist::kGrid:
      return "grid";
  }
  return "?";
}

void validate(const DistParams& p) {
  auto finite_float = [](double v) { return std::isfinite(v) && std::fabs(v) <= FLT_MAX; };
  switch (p.dist) {
    case Dist::kUniform:
      if (!finite_float(p.a) || !finite_float(p.b)) {
        throw std::invalid_argument("--a/--b: bounds must be finite floats");
      }
      if (!(p.a < p.b)) throw std::invalid_argument("--a/--b: need a < b");
      break;
    case Dist::kNormal:
      if (!(p.sigma > 0) || !std::isfinite(p.sigma)) {
        throw std::invalid_argument("--sigma: must be positive and finite");
      }
      if (!std::isfinite(p.mu) || std::fabs(p.mu) + kMaxNormalZ * p.sigma > FLT_MAX) {
        throw std::invalid_argument("--mu/--sigma: samples could leave the finite float range");
      }
      break;
    case Dist::kLogUniform:
      // 2^-149 is the smallest float subnormal; 2^127 keeps every sample finite.
      if (!(p.emin >= -149 && p.emax <= 127)) {
        throw std::invalid_argument("--emin/--emax: exponents must lie in [-149, 127]");
      }
      if (!(p.emin < p.emax)) throw std::invalid_argument("--emin/--emax: need emin < emax");
      break;
    case Dist::kGrid:
      if (p.fractions.empty()) throw std::invalid_argument("--fractions: need at least one");
      for (double f : p.fractions) {
        if (!(f > 0 && f < 1)) {
          throw std::invalid_argument("--fractions: every fraction must lie in (0, 1)");
        }
      }
      if (!(p.emin < p.emax) || !std::isfinite(p.emin) || !std::isfinite(p.emax)) {
        throw std::invalid_argument("--emin/--emax: need finite emin < emax");
      }
      break;
  }
}

std::string describe(const DistParams& p) {
  char buf[160];
  switch (p.dist) {
    case Dist::kUniform:
      std::snprintf(buf, sizeof buf, "uniform(a=%g, b=%g)", p.a, p.b);
      break;
    case Dist::kNormal:
      std::snprintf(buf, sizeof buf, "normal(mu=%g, sigma=%g)", p.mu, p.sigma);
      break;
    case Dist::kLogUniform:
      std::snprintf(buf, sizeof buf, "loguniform(|x| in [2^%g, 2^%g))", p.emin, p.emax);
      break;
    case Dist::kGrid: {
      std::string f;
      for (double v : p.fractions) f += (f.empty() ? "" : ",") + strprintf("%g", v);
      std::snprintf(buf, sizeof buf, "grid(fractions %s, exponents [%g, %g))", f.c_str(), p.emin,
                    p.emax);
      break;
    }
  }
  return buf;
}

namespace {

Sampler::Setup setup_of(const DistParams& p, FpFormat format) {
  Sampler::Setup s;
  if (p.dist == Dist::kGrid) {
    grid_exponents(p, format, &s.grid_lo, &s.grid_hi);
    s.grid_man = -std::ilogb(fp_format_ulp(format, 1.0f));
  }
  return s;
}

// Sample `index` from its Philox block w (the stream's block number `index`):
// the one definition of every distribution, shared by sample() and Sampler.
// A template on the distribution, so that Sampler's loop has no switch in it.
template <Dist D>
float sample_from_block(const DistParams& p, const Sampler::Setup& s, const uint32_t* w,
                        uint64_t index) {
  const double u = unit(w[0], w[1]);
  if constexpr (D == Dist::kUniform) {
    return float(p.a + (p.b - p.a) * u);
  } else if constexpr (D == Dist::kNormal) {
    const double radius = std::sqrt(-2.0 * std::log1p(-u));
    return float(p.mu + p.sigma * radius * std::cos(kTwoPi * unit(w[2], w[3])));
  } else if constexpr (D == Dist::kLogUniform) {
    return float(std::exp2(p.emin + (p.emax - p.emin) * u));
  } else {
    const int e = s.grid_lo + int(w[2] % uint32_t(s.grid_hi - s.grid_lo));
    const uint32_t k = w[3] & ((1u << s.grid_man) - 1);
    const double f = p.fractions[index % p.fractions.size()];
    return float(std::ldexp(1.0 + (double(k) + f) * std::ldexp(1.0, -s.grid_man), e));
  }
}

// fn.template operator()<d>() for the distribution d.
template <typename Fn>
auto with_dist(Dist d, Fn&& fn) {
  switch (d) {
    case Dist::kUniform:
      return fn.template operator()<Dist::kUniform>();
    case Dist::kNormal:
      return fn.template operator()<Dist::kNormal>();
    case Dist::kLogUniform:
      return fn.template operator()<Dist::kLogUniform>();
    default:
      return fn.template operator()<Dist::kGrid>();
  }
}

}  // namespace

float sample(const DistParams& p, uint64_t seed, uint64_t index, FpFormat format) {
  const Philox4 w = sr_block(seed, RngPurpose::kAuditData, 0, index);
  const Sampler::Setup setup = setup_of(p, format);
  return with_dist(p.dist, [&]<Dist D>() { return sample_from_block<D>(p, setup, w.v, index); });
}

Sampler::Sampler(const DistParams& p, uint64_t seed, FpFormat format)
    : params_(p), seed_(seed), setup_((validate(p), setup_of(p, format))) {}

void Sampler::fill(uint64_t first, size_t n, float* x) const {
  const cpu::SrStream stream = cpu::sr_stream(seed_, RngPurpose::kAuditData, 0);
  // sr_bits_batch gives blocks as 16-bit lanes, low half first: on a
  // little-endian machine they are the blocks' 32-bit words in order.
  static_assert(std::endian::native == std::endian::little);
  alignas(64) uint16_t lanes[cpu::kSrBitsBatch];
  with_dist(params_.dist, [&]<Dist D>() {
    for (size_t k0 = 0; k0 < n; k0 += cpu::kSrBatchGroups) {
      cpu::sr_bits_batch(stream, first + k0, lanes);
      const size_t count = std::min(cpu::kSrBatchGroups, n - k0);
      for (size_t k = 0; k < count; ++k) {
        uint32_t block[4];  // one 16-byte copy per sample, not a call per batch
        std::memcpy(block, lanes + kSrElementsPerPhilox * k, sizeof block);
        x[k0 + k] = sample_from_block<D>(params_, setup_, block, first + k0 + k);
      }
    }
  });
}

}  // namespace srkit::audit
