// The fp32 -> bf16 cast audit behind `sr-audit cast`: draw N inputs, round each
// with RN, SR and RZ (the biased reference), and collect RoundingStats per mode.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"
#include "lib/audit/distribution.h"
#include "lib/audit/rounding_stats.h"

namespace srkit::audit {

struct CastAuditConfig {
  DistParams dist;
  uint64_t samples = 10'000'000;
  uint64_t seed = 1;
};

struct NamedStats {
  std::string mode;
  RoundingStats stats;
};

// Throws std::invalid_argument naming the flag (-n/--samples, distribution
// flags) on bad settings.
void validate(const CastAuditConfig& c);

// Runs on the current OpenMP threads; the result is the same for any count.
// Inputs come in fixed chunks and their statistics are merged in chunk order.
std::vector<NamedStats> run_cast_audit(const CastAuditConfig& c);

// Adds one bf16 rounding of x: the fraction is x's dropped low 16 bits / 2^16
// and "up" means q is not the truncation of x.
void add_bf16(RoundingStats& s, float x, bf16 q);

// Markdown table, one row per mode (the column order tests rely on).
std::string markdown_table(const std::vector<NamedStats>& rows);

}  // namespace srkit::audit
