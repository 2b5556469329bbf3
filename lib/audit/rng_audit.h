// Quality checks of the 16-bit lanes stochastic rounding consumes (the
// random-bits contract, sr_bits.h), behind `sr-audit rng`:
//   - Philox4x32-10 known answers (Random123's vectors),
//   - chi-square uniformity of the lane values (2^16 bins) and of each of the
//     16 bit positions,
//   - serial correlation between neighbouring lanes of one stream (within a
//     Philox block and across consecutive blocks),
//   - correlation between the same element's lanes at consecutive steps, and
//     between two purposes at the same step.
// Every statistic is turned into a z-score under the null hypothesis "the
// lanes are independent uniform 16-bit integers"; |z| >= 5 fails (a correct
// generator fails one test with probability ~6e-7). Sums are exact integers,
// so results do not depend on the thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/common/philox.h"
#include "kernels/common/sr_bits.h"

namespace srkit::audit {

struct RngAuditConfig {
  uint64_t samples = 10'000'000;  // lanes per stream
  uint64_t seed = 1;
  uint32_t purpose = 1;  // the first purpose; the second one is purpose + 1
  uint64_t step = 0;     // the first step; the second one is step + 1
};

// 128 bits = 8 lanes of (seed, purpose, step, group); the contract's sr_block
// by default. Tests plant defective sources to check the audit flags them.
using BlockSource =
    std::function<Philox4(uint64_t seed, RngPurpose purpose, uint64_t step, uint64_t group)>;
BlockSource contract_source();

constexpr double kRngFailZ = 5.0;

struct RngTest {
  std::string name;
  double statistic = 0;  // chi-square, correlation or count of passed vectors
  double expected = 0;   // its value under the null hypothesis
  double z = 0;
  bool pass = false;
};

struct RngAuditResult {
  RngAuditConfig config;
  std::vector<RngTest> tests;
  std::vector<uint64_t> coarse_histogram;  // lane >> 10: 64 bins, for charts
  bool all_pass() const;
};

// Throws std::invalid_argument naming the flag (-n/--samples) when samples is
// below 1000 (too few for the tests) or above 2^32 (integer sums would overflow).
void validate(const RngAuditConfig& c);

// Runs on the current OpenMP threads.
RngAuditResult run_rng_audit(const RngAuditConfig& c,
                             const BlockSource& source = contract_source());

// The three Random123 known-answer vectors of Philox4x32-10; returns how many match.
int philox_known_answers_matched();

std::string markdown_table(const RngAuditResult& r);

}  // namespace srkit::audit
