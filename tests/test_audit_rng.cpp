// The RNG audit (lib/audit/rng_audit.h): the contract's lanes pass every test,
// and planted defects are flagged by the test meant to catch them: a stuck bit
// (uniformity), neighbouring lanes that copy each other (serial correlation),
// a step that is ignored (step correlation) and purposes that share bits
// (purpose correlation). Results do not depend on the thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <stdexcept>

#include "kernels/common/sr_bits.h"
#include "lib/audit/rng_audit.h"

namespace srkit::audit {
namespace {

RngAuditConfig small() {
  RngAuditConfig c;
  c.samples = 400'000;
  c.seed = 11;
  return c;
}

const RngTest& find(const RngAuditResult& r, const std::string& prefix) {
  for (const RngTest& t : r.tests) {
    if (t.name.rfind(prefix, 0) == 0) return t;
  }
  throw std::runtime_error("no test " + prefix);
}

TEST(AuditRng, ContractLanesPassEveryTest) {
  const RngAuditResult r = run_rng_audit(small());
  ASSERT_EQ(r.tests.size(), 6u);
  for (const RngTest& t : r.tests) EXPECT_TRUE(t.pass) << t.name << " z=" << t.z;
  EXPECT_TRUE(r.all_pass());
  EXPECT_EQ(philox_known_answers_matched(), 3);
  uint64_t total = 0;
  for (uint64_t c : r.coarse_histogram) total += c;
  EXPECT_EQ(total, small().samples);
}

TEST(AuditRng, StuckLowBitFailsUniformity) {
  const BlockSource stuck = [](uint64_t seed, RngPurpose purpose, uint64_t step, uint64_t g) {
    Philox4 b = sr_block(seed, purpose, step, g);
    for (uint32_t& w : b.v) w |= 0x00010001u;  // lane bit 0 always 1
    return b;
  };
  const RngAuditResult r = run_rng_audit(small(), stuck);
  EXPECT_FALSE(find(r, "chi-square, 65536").pass);
  EXPECT_FALSE(find(r, "chi-square, 16 bit").pass);
  EXPECT_FALSE(r.all_pass());
}

TEST(AuditRng, CopiedNeighbourLanesFailSerialCorrelation) {
  const BlockSource copied = [](uint64_t seed, RngPurpose purpose, uint64_t step, uint64_t g) {
    Philox4 b = sr_block(seed, purpose, step, g);
    for (uint32_t& w : b.v) w = (w & 0xffffu) | (w << 16);  // odd lane = even lane
    return b;
  };
  const RngAuditResult r = run_rng_audit(small(), copied);
  EXPECT_FALSE(find(r, "correlation, neighbouring").pass);
  EXPECT_GT(find(r, "correlation, neighbouring").statistic, 0.4);
  EXPECT_TRUE(find(r, "correlation, step").pass) << "steps stay independent";
}

TEST(AuditRng, IgnoredStepOrSharedPurposeFailTheirCorrelation) {
  const BlockSource no_step = [](uint64_t seed, RngPurpose purpose, uint64_t, uint64_t g) {
    return sr_block(seed, purpose, 0, g);
  };
  EXPECT_FALSE(find(run_rng_audit(small(), no_step), "correlation, step").pass);
  const BlockSource no_purpose = [](uint64_t seed, RngPurpose, uint64_t step, uint64_t g) {
    return sr_block(seed, RngPurpose(1), step, g);
  };
  const RngAuditResult r = run_rng_audit(small(), no_purpose);
  EXPECT_FALSE(find(r, "correlation, purpose").pass);
  EXPECT_TRUE(find(r, "correlation, step").pass);
}

TEST(AuditRng, SameResultForAnyThreadCount) {
  RngAuditConfig c = small();
  c.samples = 300'001;  // a partial last block and several chunks
  omp_set_num_threads(1);
  const RngAuditResult a = run_rng_audit(c);
  omp_set_num_threads(2);
  const RngAuditResult b = run_rng_audit(c);
  ASSERT_EQ(a.tests.size(), b.tests.size());
  for (size_t k = 0; k < a.tests.size(); ++k) {
    EXPECT_EQ(a.tests[k].statistic, b.tests[k].statistic) << a.tests[k].name;
  }
  EXPECT_EQ(a.coarse_histogram, b.coarse_histogram);
}

TEST(AuditRng, BadSettingsThrow) {
  RngAuditConfig c = small();
  c.samples = 0;
  EXPECT_THROW(validate(c), std::invalid_argument);
  c.samples = 999;
  EXPECT_THROW(validate(c), std::invalid_argument);
  c.samples = (uint64_t(1) << 31) + 1;
  EXPECT_THROW(validate(c), std::invalid_argument);
  c = small();
  c.purpose = 0xffff;
  EXPECT_THROW(validate(c), std::invalid_argument);
}

}  // namespace
}  // namespace srkit::audit
