#include "lib/audit/cast_audit.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "kernels/common/sr_bits.h"
#include "kernels/cpu/cast.h"

namespace srkit::audit {
namespace {

constexpr size_t kChunk = size_t(1) << 16;  // inputs per work item
constexpr size_t kChunksPerRound = 64;      // work items merged together, in order

enum Mode { kRN, kSR, kRZ, kModes };
const char* const kModeNames[kModes] = {"RN", "SR", "RZ"};

struct ChunkStats {
  RoundingStats by_mode[kModes];
};

// Statistics of inputs [begin, begin + n): the buffers are per call, so the
// work is independent of which thread runs it.
ChunkStats audit_chunk(const CastAuditConfig& c, uint64_t begin, size_t n) {
  std::vector<float> x(n);
  std::vector<bf16> q[kModes];
  for (auto& v : q) v.resize(n);
  for (size_t i = 0; i < n; ++i) x[i] = sample(c.dist, c.seed, begin + i);
  cpu::cast_f32_to_bf16_rn(x.data(), q[kRN].data(), n);
  cpu::cast_f32_to_bf16_sr(x.data(), q[kSR].data(), n, c.seed, uint32_t(RngPurpose::kCast), 0,
                           begin);
  for (size_t i = 0; i < n; ++i) q[kRZ][i] = float_to_bf16_rz(x[i]);
  ChunkStats s;
  for (int m = 0; m < kModes; ++m) {
    for (size_t i = 0; i < n; ++i) add_bf16(s.by_mode[m], x[i], q[m][i]);
  }
  return s;
}

std::string format_g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace

void validate(const CastAuditConfig& c) {
  if (c.samples == 0) throw std::invalid_argument("-n/--samples: must be at least 1");
  validate(c.dist);
}

void add_bf16(RoundingStats& s, float x, bf16 q) {
  const uint32_t u = float_as_bits(x);
  const double f = double(u & 0xffffu) / 65536.0;
  const bool up = q.bits != uint16_t(u >> 16);
  s.add(double(x), double(bf16_to_float(q)), f, up);
}

std::vector<NamedStats> run_cast_audit(const CastAuditConfig& c) {
  validate(c);
  const uint64_t chunks = (c.samples + kChunk - 1) / kChunk;
  RoundingStats total[kModes];
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
      for (int m = 0; m < kModes; ++m) total[m].merge(slots[size_t(k)].by_mode[m]);
    }
  }
  std::vector<NamedStats> rows;
  for (int m = 0; m < kModes; ++m) rows.push_back({kModeNames[m], total[m]});
  return rows;
}

std::string markdown_table(const std::vector<NamedStats>& rows) {
  std::string out =
      "| mode | mean error (bias) | z | relative bias | mean abs error | max abs error | "
      "P(up) calibration |\n"
      "|---|---:|---:|---:|---:|---:|---:|\n";
  for (const NamedStats& r : rows) {
    const RoundingStats& s = r.stats;
    out += "| " + r.mode + " | " + format_g(s.mean_error()) + " | " + format_g(s.z_score()) +
           " | " + format_g(s.relative_bias()) + " | " + format_g(s.mean_abs_error()) + " | " +
           format_g(s.max_abs_error()) + " | " + format_g(s.calibration_error()) + " |\n";
  }
  return out;
}

}  // namespace srkit::audit
