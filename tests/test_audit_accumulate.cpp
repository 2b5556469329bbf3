// The accumulation audit (lib/audit/accumulate.h) on cases with known answers:
// where RN stalls, RN's error growing like n, SR's like sqrt(n) with the
// predicted constant, Kahan recovering the sum, determinism, bad settings.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "lib/audit/accumulate.h"

namespace srkit::audit {
namespace {

AccumulateConfig config(FpFormat f, double x0, double delta, uint64_t steps, uint32_t repeats) {
  AccumulateConfig c;
  c.format = f;
  c.x0 = x0;
  c.delta = delta;
  c.steps = steps;
  c.repeats = repeats;
  c.seed = 3;
  return c;
}

const MethodResult& method(const AccumulateResult& r, AccumMethod m) {
  return r.methods.at(size_t(m));
}

// delta = ulp(1)/8 in bf16 is below half an ulp: RN erases the very first
// update and every later one; fp32 holds the sum exactly (k * 2^-10 + 1).
TEST(AuditAccumulate, RoundToNearestStallsAtOnceBelowHalfAnUlp) {
  const double delta = std::ldexp(1.0, -10);
  const AccumulateResult r = run_accumulate(config(FpFormat::kBf16, 1.0, delta, 1000, 4));
  EXPECT_EQ(r.exact, 1.0 + 1000 * delta);
  EXPECT_EQ(method(r, AccumMethod::kRN).stall_step, 1);
  EXPECT_EQ(method(r, AccumMethod::kRN).final_value, 1.0);
  EXPECT_DOUBLE_EQ(method(r, AccumMethod::kRN).rel_error, -1000 * delta / r.exact);
  EXPECT_EQ(method(r, AccumMethod::kFp32).final_value, r.exact);
  EXPECT_EQ(method(r, AccumMethod::kFp32).stall_step, -1);
}

// delta = 0.6 ulp(1): RN rounds every sum up by a whole ulp until x reaches 2,
// where the ulp doubles and 0.6 old ulps are 0.3 new ones: stall at step 129
// with x = 2 (the stagnation point).
TEST(AuditAccumulate, RoundToNearestStagnationPointAtTheNextBinade) {
  const double delta = 0.6 * std::ldexp(1.0, -7);
  const AccumulateResult r = run_accumulate(config(FpFormat::kBf16, 1.0, delta, 1000, 2));
  EXPECT_EQ(method(r, AccumMethod::kRN).stall_step, 129);
  EXPECT_EQ(method(r, AccumMethod::kRN).stall_value, 2.0);
  EXPECT_EQ(method(r, AccumMethod::kRN).final_value, 2.0);
}

// After every SR step x is representable and x + delta sits at fraction 0.1:
// each step adds an independent error of variance 0.1 * 0.9 ulp^2, so the rms
// error after n steps is 0.3 sqrt(n) ulps. RN stalls at once: its error is
// exactly 0.1 n ulps (grows like n). 400 repeats: the rms estimate has ~3.5%
// relative standard error; the tolerance is 15%.
TEST(AuditAccumulate, StochasticErrorGrowsLikeSqrtNAndNearestLikeN) {
  for (uint64_t n : {1000u, 4000u}) {
    const double delta = 0.1 * std::ldexp(1.0, -10);  // fp16: ulp(1) = 2^-10
    const AccumulateResult r = run_accumulate(config(FpFormat::kFp16, 1.0, delta, n, 400));
    const double predicted = 0.3 * std::sqrt(double(n));
    EXPECT_NEAR(method(r, AccumMethod::kSR).rms_error_ulps, predicted, 0.15 * predicted) << n;
    EXPECT_NEAR(method(r, AccumMethod::kRN).rms_error_ulps, 0.1 * double(n), 1e-6 * double(n));
    // Unbiased: the mean relative error is within 5 standard errors of 0.
    const MethodResult& sr = method(r, AccumMethod::kSR);
    EXPECT_LT(std::fabs(sr.rel_error), 5 * sr.rel_error_std / std::sqrt(400.0)) << n;
  }
}

// bf16 with a bf16 compensation recovers a sum that plain RN loses entirely.
TEST(AuditAccumulate, KahanRecoversWhatNearestLoses) {
  const double delta = 0.1 * std::ldexp(1.0, -7);
  const AccumulateResult r = run_accumulate(config(FpFormat::kBf16, 1.0, delta, 1000, 1));
  EXPECT_GT(std::fabs(method(r, AccumMethod::kRN).rel_error), 0.3);
  EXPECT_LT(method(r, AccumMethod::kKahan).rms_error_ulps, 1.0);
  EXPECT_EQ(method(r, AccumMethod::kKahan).stall_step, -1);
}

TEST(AuditAccumulate, DeterministicUnderSeedAndTracesHaveTheRequestedPoints) {
  AccumulateConfig c = config(FpFormat::kE5M2, 1.0, 0.03, 500, 8);
  c.trace_points = 11;
  const AccumulateResult a = run_accumulate(c), b = run_accumulate(c);
  ASSERT_EQ(a.trace_steps.size(), 11u);
  EXPECT_EQ(a.trace_steps.front(), 0u);
  EXPECT_EQ(a.trace_steps.back(), 500u);
  for (int m = 0; m < kAccumMethods; ++m) {
    EXPECT_EQ(a.methods[m].final_value, b.methods[m].final_value);
    EXPECT_EQ(a.methods[m].rel_error_std, b.methods[m].rel_error_std);
    EXPECT_EQ(a.methods[m].trace, b.methods[m].trace);
    EXPECT_EQ(a.methods[m].trace.size(), 11u);
    EXPECT_EQ(a.methods[m].trace.front(), 0.0);
  }
  c.seed = 4;
  EXPECT_NE(run_accumulate(c).methods[2].final_value, a.methods[2].final_value);
}

TEST(AuditAccumulate, SweepRatiosCoverTheRangeLogSpaced) {
  const std::vector<double> r = sweep_ratios(1e-3, 10, 4);
  ASSERT_EQ(r.size(), 17u);
  EXPECT_DOUBLE_EQ(r.front(), 1e-3);
  EXPECT_DOUBLE_EQ(r.back(), 10);
  EXPECT_NEAR(r[4], 1e-2, 1e-15);
}

TEST(AuditAccumulate, BadSettingsThrowNamingTheFlag) {
  auto expect_flag = [](const AccumulateConfig& c, const char* flag) {
    try {
      validate(c);
      ADD_FAILURE() << "no error for " << flag;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  expect_flag(config(FpFormat::kBf16, 1, 0.01, 0, 1), "--steps");
  expect_flag(config(FpFormat::kBf16, 1, 0.01, 10, 0), "--repeats");
  expect_flag(config(FpFormat::kBf16, 1, 0.0, 10, 1), "--delta");
  expect_flag(config(FpFormat::kBf16, 1, NAN, 10, 1), "--delta");
  expect_flag(config(FpFormat::kBf16, 1, 1e-50, 10, 1), "--delta");  // 0 in fp32
  expect_flag(config(FpFormat::kE4M3, 1, 1.0, 1000, 1), "--steps");  // leaves [-448, 448]
  expect_flag(config(FpFormat::kE4M3, 500, 1.0, 1, 1), "--x0");
  expect_flag(config(FpFormat::kBf16, 1, -0.5, 2, 1), "exact sum is 0");
  EXPECT_THROW(sweep_ratios(10, 1e-3, 4), std::invalid_argument);
  EXPECT_THROW(sweep_ratios(1, 1, 4), std::invalid_argument);
  EXPECT_THROW(sweep_ratios(0, 1, 4), std::invalid_argument);
  EXPECT_THROW(sweep_ratios(1e-3, 1, 0), std::invalid_argument);
  EXPECT_THROW(parse_format_list("bf16,fp7", "--format"), std::invalid_argument);
  EXPECT_THROW(parse_format_list("", "--format"), std::invalid_argument);
  EXPECT_THROW(parse_format_list("bf16,", "--format"), std::invalid_argument);
  EXPECT_EQ(parse_format_list("all", "--format").size(), 4u);
  EXPECT_EQ(parse_format_list("fp16,e4m3", "--format"),
            (std::vector<FpFormat>{FpFormat::kFp16, FpFormat::kE4M3}));
}

TEST(AuditAccumulate, TablesHaveOneRowPerMethodOrRatio) {
  const AccumulateResult r = run_accumulate(config(FpFormat::kFp16, 1.0, 1e-4, 100, 2));
  const std::string t = markdown_table({r});
  for (const char* row :
       {"| fp16 | fp32 |", "| fp16 | RN |", "| fp16 | SR |", "| fp16 | Kahan |"}) {
    EXPECT_NE(t.find(row), std::string::npos) << row << "\n" << t;
  }
  EXPECT_NE(sweep_markdown_table({r, r}).find("| fp16 | "), std::string::npos);
}

}  // namespace
}  // namespace srkit::audit
