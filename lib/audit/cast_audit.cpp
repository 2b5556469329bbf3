#include "lib/audit/cast_audit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "kernels/common/sr_bits.h"
#include "kernels/cpu/philox_simd.h"
#include "lib/util/format.h"

namespace srkit::audit {
namespace {

constexpr size_t kChunk = size_t(1) << 16;  // inputs per work item
constexpr size_t kChunksPerRound = 64;      // work items merged together, in order

constexpr RoundMode kModes[] = {RoundMode::kRN, RoundMode::kSR, RoundMode::kRZ};
constexpr int kModeCount = 3;

struct ChunkStats {
  RoundingStats by_mode[kModeCount];
};

// Inputs go through a chunk in batches: the samples and the SR bits of a
// batch come from the vectorized Philox, every mode's roundings are computed
// into arrays, and each mode's statistics take the batch at once
// (RoundingStats::add_batch).
constexpr size_t kBatch = RoundingStats::InputBatch::kMax;
static_assert(kBatch == cpu::kSrBitsBatch && kChunk % kBatch == 0);

struct BatchScratch {
  RoundingStats::InputBatch in;
  alignas(64) float x[kBatch];
  alignas(64) float ulp[kBatch], low[kBatch];  // bracket of each (in-range) input
  alignas(64) float q[kModeCount][kBatch];
  alignas(64) uint8_t up[kModeCount][kBatch];
  alignas(64) uint16_t r[kBatch];
};

// Every mode's rounding of inputs 0 .. count - 1, their brackets and the
// statistics' per-input quantities. Two branch-free loops, so that both
// vectorize: the format's integer arithmetic in fp32 lanes, then the
// fractions in double lanes. An out-of-range input is rounded as 0 and its
// results replaced by NaN, which add_batch counts as out of range.
template <FpFormat F>
void round_batch(BatchScratch& b, size_t count) {
  const float max = fp_format_max(F);
  static_assert(kModes[0] == RoundMode::kRN && kModes[1] == RoundMode::kSR &&
                kModes[2] == RoundMode::kRZ);
#pragma omp simd
  for (size_t i = 0; i < count; ++i) {
    // Masks, not branches: all ones for an input in range.
    const uint32_t keep = 0u - uint32_t(std::fabs(b.x[i]) <= max);
    const uint32_t nan_unless_kept = 0x7fc00000u & ~keep;
    const float x = bits_as_float(float_as_bits(b.x[i]) & keep);
    const float rn = fp_round(F, RoundMode::kRN, x, 0);
    const float sr = fp_round(F, RoundMode::kSR, x, b.r[i]);
    const float rz = fp_round(F, RoundMode::kRZ, x, 0);
    const float low = std::fabs(rz);  // the neighbour toward zero
    b.x[i] = x;
    b.ulp[i] = fp_format_ulp(F, x);
    b.low[i] = low;
    b.q[0][i] = bits_as_float((float_as_bits(rn) & keep) | nan_unless_kept);
    b.q[1][i] = bits_as_float((float_as_bits(sr) & keep) | nan_unless_kept);
    b.q[2][i] = bits_as_float((float_as_bits(rz) & keep) | nan_unless_kept);
    b.up[0][i] = uint8_t(keep & uint32_t(std::fabs(rn) > low));
    b.up[1][i] = uint8_t(keep & uint32_t(std::fabs(sr) > low));
    b.up[2][i] = uint8_t(keep & uint32_t(std::fabs(rz) > low));
  }
#pragma omp simd
  for (size_t i = 0; i < count; ++i) {
    b.in.set(i, b.x[i], fraction_above(b.x[i], b.low[i], b.ulp[i]), b.ulp[i]);
  }
}

// Statistics of inputs [begin, begin + n), begin a multiple of kBatch: the
// work is a function of the chunk alone, whichever thread runs it.
template <FpFormat F>
ChunkStats audit_chunk(const Sampler& sampler, const cpu::SrStream& sr, uint64_t begin, size_t n) {
  ChunkStats s;
  BatchScratch b;
  for (size_t done = 0; done < n; done += kBatch) {
    const uint64_t first = begin + done;
    const size_t count = std::min(kBatch, n - done);
    sampler.fill(first, count, b.x);
    // SR bits of elements first .. first + 255: the contract's bits for the cast.
    cpu::sr_bits_batch(sr, first / kSrElementsPerPhilox, b.r);
    round_batch<F>(b, count);
    b.in.summarize(count);
    for (int m = 0; m < kModeCount; ++m) s.by_mode[m].add_batch(b.in, b.q[m], b.up[m]);
  }
  return s;
}

ChunkStats audit_chunk(FpFormat format, const Sampler& sampler, const cpu::SrStream& sr,
                       uint64_t begin, size_t n) {
  switch (format) {
    case FpFormat::kBf16:
      return audit_chunk<FpFormat::kBf16>(sampler, sr, begin, n);
    case FpFormat::kFp16:
      return audit_chunk<FpFormat::kFp16>(sampler, sr, begin, n);
    case FpFormat::kE4M3:
      return audit_chunk<FpFormat::kE4M3>(sampler, sr, begin, n);
    default:
      return audit_chunk<FpFormat::kE5M2>(sampler, sr, begin, n);
  }
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
  const float low = std::fabs(fp_round(format, RoundMode::kRZ, x, 0));
  const float ulp = fp_format_ulp(format, x);
  return Bracket{ulp, low, fraction_above(x, low, ulp)};
}

void add_rounding(RoundingStats& s, const Bracket& b, float x, float q) {
  s.add(double(x), double(q), b.f, rounded_up(b, q), b.ulp);
}

std::vector<NamedStats> run_cast_audit(const CastAuditConfig& c) {
  validate(c);
  const uint64_t chunks = (c.samples + kChunk - 1) / kChunk;
  const Sampler sampler(c.dist, c.seed, c.format);
  const cpu::SrStream sr = cpu::sr_stream(c.seed, RngPurpose::kCast, 0);
  RoundingStats total[kModeCount];
  std::vector<ChunkStats> slots(kChunksPerRound);
  for (uint64_t first = 0; first < chunks; first += kChunksPerRound) {
    const int64_t count = int64_t(std::min<uint64_t>(kChunksPerRound, chunks - first));
#pragma omp parallel for schedule(dynamic)
    for (int64_t k = 0; k < count; ++k) {
      const uint64_t begin = (first + uint64_t(k)) * kChunk;
      slots[size_t(k)] = audit_chunk(c.format, sampler, sr, begin,
                                     size_t(std::min<uint64_t>(kChunk, c.samples - begin)));
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
