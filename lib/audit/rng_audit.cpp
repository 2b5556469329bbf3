#include "lib/audit/rng_audit.h"

#include <cmath>
#include <stdexcept>

#include "kernels/common/sr_bits.h"
#include "lib/util/format.h"

namespace srkit::audit {
namespace {

constexpr uint64_t kGroupsPerChunk = uint64_t(1) << 14;
constexpr int kBins = 1 << 16;

// Exact integer moments of a pair of 16-bit streams: with at most 2^31 pairs
// no sum overflows 64 bits, and integer addition makes merging order-free.
struct PairSums {
  uint64_t n = 0, sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  void add(uint64_t x, uint64_t y) {
    ++n;
    sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y;
  }
  void merge(const PairSums& o) {
    n += o.n, sx += o.sx, sy += o.sy, sxx += o.sxx, syy += o.syy, sxy += o.sxy;
  }
  // Pearson correlation, computed in long double from the exact sums.
  double correlation() const {
    const long double nn = n;
    const long double cov = nn * sxy - (long double)sx * sy;
    const long double vx = nn * sxx - (long double)sx * sx, vy = nn * syy - (long double)sy * sy;
    return vx > 0 && vy > 0 ? double(cov / std::sqrt(vx * vy)) : 0.0;
  }
};

struct Sums {
  std::vector<uint64_t> hist = std::vector<uint64_t>(kBins, 0);
  PairSums serial, steps, purposes;
  void merge(const Sums& o) {
    for (int k = 0; k < kBins; ++k) hist[k] += o.hist[k];
    serial.merge(o.serial), steps.merge(o.steps), purposes.merge(o.purposes);
  }
};

uint32_t lane(const Philox4& b, unsigned k) { return sr_lane(b, k); }

// Groups [g0, g1) of the three streams; lanes at or beyond `samples` are left out.
void audit_chunk(const RngAuditConfig& c, const BlockSource& source, uint64_t g0, uint64_t g1,
                 Sums* s) {
  // validate() keeps purpose + 1 within the contract's 16 bits.
  const RngPurpose first = RngPurpose(uint16_t(c.purpose)),
                   second = RngPurpose(uint16_t(c.purpose + 1));
  bool have_prev = false;
  uint32_t prev = 0;
  if (g0 > 0) {  // the serial pair that straddles the chunk boundary
    prev = lane(source(c.seed, first, c.step, g0 - 1), 7);
    have_prev = true;
  }
  for (uint64_t g = g0; g < g1; ++g) {
    const Philox4 a = source(c.seed, first, c.step, g);
    const Philox4 b = source(c.seed, first, c.step + 1, g);
    const Philox4 p = source(c.seed, second, c.step, g);
    for (unsigned k = 0; k < 8; ++k) {
      if (g * 8 + k >= c.samples) return;
      const uint32_t x = lane(a, k);
      ++s->hist[x];
      if (have_prev) s->serial.add(prev, x);
      prev = x;
      have_prev = true;
      s->steps.add(x, lane(b, k));
      s->purposes.add(x, lane(p, k));
    }
  }
}

// Wilson-Hilferty: a chi-square with k degrees of freedom as a standard normal.
double chi_square_z(double chi2, double k) {
  const double h = 2.0 / (9.0 * k);
  return (std::cbrt(chi2 / k) - (1 - h)) / std::sqrt(h);
}

RngTest make(const std::string& name, double statistic, double expected, double z) {
  return RngTest{name, statistic, expected, z, std::fabs(z) < kRngFailZ};
}

RngTest correlation_test(const std::string& name, const PairSums& p) {
  const double r = p.correlation();
  return make(name, r, 0.0, r * std::sqrt(double(p.n)));
}

}  // namespace

BlockSource contract_source() {
  return [](uint64_t seed, RngPurpose purpose, uint64_t step, uint64_t group) {
    return sr_block(seed, purpose, step, group);
  };
}

bool RngAuditResult::all_pass() const {
  for (const RngTest& t : tests) {
    if (!t.pass) return false;
  }
  return !tests.empty();
}

void validate(const RngAuditConfig& c) {
  if (c.samples < 1000) {
    throw std::invalid_argument(
        strprintf("-n/--samples: %llu lanes are too few (need at least 1000)",
                  static_cast<unsigned long long>(c.samples)));
  }
  if (c.samples > (uint64_t(1) << 31)) {
    throw std::invalid_argument("-n/--samples: at most 2^31 lanes (exact integer sums)");
  }
  if (c.step >= kSrMaxStep) throw std::invalid_argument("--step: must be below 2^48 - 1");
  if (c.purpose >= 0xffffu) throw std::invalid_argument("--purpose: must be below 65535");
}

int philox_known_answers_matched() {
  struct Vector {
    uint32_t ctr[4], key[2], out[4];
  };
  const Vector vectors[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  int matched = 0;
  for (const Vector& v : vectors) {
    const Philox4 got = philox4x32_10(v.ctr[0], v.ctr[1], v.ctr[2], v.ctr[3], v.key[0], v.key[1]);
    bool same = true;
    for (int k = 0; k < 4; ++k) same = same && got.v[k] == v.out[k];
    matched += same;
  }
  return matched;
}

RngAuditResult run_rng_audit(const RngAuditConfig& c, const BlockSource& source) {
  validate(c);
  const uint64_t groups = (c.samples + 7) / 8;
  const int64_t chunks = int64_t((groups + kGroupsPerChunk - 1) / kGroupsPerChunk);
  Sums total;
#pragma omp parallel
  {
    Sums mine;
#pragma omp for schedule(dynamic)
    for (int64_t k = 0; k < chunks; ++k) {
      const uint64_t g0 = uint64_t(k) * kGroupsPerChunk;
      audit_chunk(c, source, g0, std::min(groups, g0 + kGroupsPerChunk), &mine);
    }
#pragma omp critical
    total.merge(mine);
  }

  RngAuditResult r;
  r.config = c;
  const int matched = philox_known_answers_matched();
  r.tests.push_back(
      RngTest{"Philox4x32-10 known answers", double(matched), 3.0, 0.0, matched == 3});

  // Uniformity over all 2^16 values.
  const double n = double(c.samples), expect = n / kBins;
  double chi2 = 0;
  for (uint64_t count : total.hist) chi2 += (double(count) - expect) * (double(count) - expect);
  chi2 /= expect;
  r.tests.push_back(
      make("chi-square, 65536 lane values", chi2, kBins - 1, chi_square_z(chi2, kBins - 1)));

  // Each bit position is 1 half the time: sum of 16 squared binomial z-scores.
  double bits_chi2 = 0;
  for (int b = 0; b < 16; ++b) {
    uint64_t ones = 0;
    for (int v = 0; v < kBins; ++v) ones += (v >> b & 1) ? total.hist[v] : 0;
    const double zb = (double(ones) - n / 2) / std::sqrt(n / 4);
    bits_chi2 += zb * zb;
  }
  r.tests.push_back(
      make("chi-square, 16 bit positions", bits_chi2, 16, chi_square_z(bits_chi2, 16)));

  r.tests.push_back(correlation_test("correlation, neighbouring lanes", total.serial));
  r.tests.push_back(correlation_test("correlation, step t vs t+1", total.steps));
  r.tests.push_back(correlation_test("correlation, purpose p vs p+1", total.purposes));

  r.coarse_histogram.assign(64, 0);
  for (int v = 0; v < kBins; ++v) r.coarse_histogram[v >> 10] += total.hist[v];
  return r;
}

std::string markdown_table(const RngAuditResult& r) {
  std::string out =
      "| test | statistic | expected | z | verdict |\n"
      "|---|---:|---:|---:|---|\n";
  for (const RngTest& t : r.tests) {
    out += strprintf("| %s | %.6g | %.6g | %.3f | %s |\n", t.name.c_str(), t.statistic, t.expected,
                     t.z, t.pass ? "pass" : "FAIL");
  }
  return out;
}

}  // namespace srkit::audit
