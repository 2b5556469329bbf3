#include "lib/audit/cast_audit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "kernels/common/sr_bits.h"
#include "lib/util/format.h"

namespace srkit::audit {
namespace {

constexpr size_t kChunk = size_t(1) << 16;  // inputs per work item (a multiple of 8)
constexpr size_t kChunksPerRound = 64;      // work items merged together, in order

constexpr RoundMode kModes[] = {RoundMode::kRN, RoundMode::kSR, RoundMode::kRZ};
constexpr int kModeCount = 3;

struct ChunkStats {
  RoundingStats by_mode[kModeCount];
};

// Statistics of inputs [begin, begin + n), begin a multiple of 8: streamed
// element by element, so the work is independent of which thread runs it.
ChunkStats audit_chunk(const CastAuditConfig& c, uint64_t begin, size_t n) {
  ChunkStats s;
  const float max = fp_format_max(c.format);
  Philox4 block{};
  for (size_t i = 0; i < n; ++i) {
    const uint64_t index = begin + i;
    if (index % 8 == 0) block = sr_block(c.seed, RngPurpose::kCast, 0, index / 8);
    const float x = sample(c.dist, c.seed, index, c.format);
    if (!(std::fabs(x) <= max)) {
      for (RoundingStats& m : s.by_mode) m.add_out_of_range();
      continue;
    }
    const uint32_t r = sr_lane(block, unsigned(index % 8));
    const Bracket b = bracket(c.format, x);
    const RoundingStats::Input in = RoundingStats::Input::make(x, b.f, b.ulp);
    for (int m = 0; m < kModeCount; ++m) {
      const float q = fp_round(c.format, kModes[m], x, r);
      s.by_mode[m].add(in, q, rounded_up(b, q));
    }
  }
  return s;
}

}  // namespace

void validate(const CastAuditConfig& c) {
  if (c.samples == 0) throw std::invalid_argument("-n/--samples: must be at least 1");
  validate(c.dist);
  if (c.dist.dist == Dist::kGrid) {
    int lo, hi;
    grid_exponents(c.dist, c.format, &lo, &hi);
  }
}

Bracket bracket(FpFormat format, float x) {
  const double low = std::fabs(double(fp_round(format, RoundMode::kRZ, x, 0)));
  const double ulp = fp_format_ulp(format, x);
  return Bracket{ulp, low, (std::fabs(double(x)) - low) / ulp};
}

void add_rounding(RoundingStats& s, const Bracket& b, float x, float q) {
  s.add(double(x), double(q), b.f, rounded_up(b, q), b.ulp);
}

std::vector<NamedStats> run_cast_audit(const CastAuditConfig& c) {
  validate(c);
  const uint64_t chunks = (c.samples + kChunk - 1) / kChunk;
  RoundingStats total[kModeCount];
  std::vector<ChunkStats> slots(kChunksPerRound);
  for (uint64_t first = 0; first < chunks; first += kChunksPerRound) {
    const int64_t count = int64_t(std::min<uint64_t>(kChunksPerRound, chunks - first));
#pragma omp parallel for schedule(dynamic)
    for (int64_t k = 0; k < count; ++k) {
      const uint64_t begin = (first + uint64_t(k)) * kChunk;
      slots[size_t(k)] =
          audit_chunk(c, begin, size_t(std::min<uint64_t>(kChunk, c.samples - begin)));
    }
    for (int64_t k = 0; k < count; ++k) {
      for (int m = 0; m < kModeCount; ++m) total[m].merge(slots[size_t(k)].by_mode[m]);
    }
  }
  std::vector<NamedStats> rows;
  for (int m = 0; m < kModeCount; ++m) {
    rows.push_back({fp_format_name(c.format), round_mode_name(kModes[m]), total[m]});
  }
  return rows;
}

std::string markdown_table(const std::vector<NamedStats>& rows) {
  std::string out =
      "| format | mode | mean error (bias) | bias (ulps) | z | relative bias | MSE | "
      "var / f(1-f)ulp^2 | mean abs error | max abs error | P(up) calibration | "
      "chi2 (dof) |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const NamedStats& r : rows) {
    const RoundingStats& s = r.stats;
    out += strprintf(
        "| %s | %s | %.4g | %.4g | %.4g | %.4g | %.4g | %.4g | %.4g | %.4g | %.4g | "
        "%.4g (%d) |\n",
        r.format.c_str(), r.mode.c_str(), s.mean_error(), s.mean_error_ulps(), s.z_score(),
        s.relative_bias(), s.mse(), s.variance_ratio(), s.mean_abs_error(), s.max_abs_error(),
        s.calibration_error(), s.chi_square(), s.chi_square_dof());
  }
  return out;
}

std::string verdicts(const std::vector<NamedStats>& rows) {
  std::string out;
  for (const NamedStats& r : rows) out += r.stats.verdict(r.format + " " + r.mode) + "\n";
  return out;
}

}  // namespace srkit::audit
