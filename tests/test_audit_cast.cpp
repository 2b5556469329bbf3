// sr-audit's statistics (lib/audit) on cases with known answers, and the
// sr-audit binary's command line (exit codes, table).
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/sr_bits.h"
#include "lib/audit/cast_audit.h"
#include "lib/audit/distribution.h"
#include "lib/audit/rounding_stats.h"

namespace srkit::audit {
namespace {

const RoundingStats& mode(const std::vector<NamedStats>& rows, const std::string& name) {
  for (const NamedStats& r : rows) {
    if (r.mode == name) return r.stats;
  }
  throw std::out_of_range("no mode " + name);
}

TEST(RoundingStats, KnownAnswers) {
  RoundingStats s;
  s.add(10.0, 11.0, 0.5, true);   // error +1
  s.add(10.0, 9.0, 0.5, false);   // error -1
  s.add(-4.0, -2.0, 0.25, true);  // error +2
  EXPECT_EQ(s.count(), 3u);
  EXPECT_DOUBLE_EQ(s.mean_error(), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.mean_abs_error(), 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.max_abs_error(), 2.0);
  EXPECT_DOUBLE_EQ(s.relative_bias(), (0.1 - 0.1 + 0.5) / 3.0);
  // Population variance 14/9: z = (2/3) / sqrt(14/9 / 3).
  EXPECT_NEAR(s.z_score(), (2.0 / 3.0) / std::sqrt(14.0 / 27.0), 1e-12);
  // Bucket of f = 0.5: P(up) = 1/2 = f; bucket of f = 0.25: P(up) = 1, off by 0.75.
  EXPECT_NEAR(s.calibration_error(), 0.75 / 3.0, 1e-12);
  // Overflow to Inf is counted apart and leaves the sums alone.
  s.add(1.0, INFINITY, 0.9, true);
  EXPECT_EQ(s.count(), 3u);
  EXPECT_EQ(s.overflows(), 1u);
  EXPECT_DOUBLE_EQ(s.mean_error(), 2.0 / 3.0);
}

TEST(RoundingStats, MergeEqualsOnePass) {
  RoundingStats all, a, b;
  for (int i = 0; i < 1000; ++i) {
    const double x = 1.0 + i * 1e-3, q = x + ((i % 7) - 3) * 1e-4;
    const double f = (i % 13) / 13.0;
    all.add(x, q, f, i % 2 == 0);
    (i < 400 ? a : b).add(x, q, f, i % 2 == 0);
  }
  a.merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_NEAR(a.mean_error(), all.mean_error(), 1e-15);
  EXPECT_NEAR(a.z_score(), all.z_score(), 1e-9);
  EXPECT_EQ(a.max_abs_error(), all.max_abs_error());
  EXPECT_NEAR(a.calibration_error(), all.calibration_error(), 1e-12);
}

TEST(Bf16Fraction, FractionAndDirection) {
  RoundingStats s;
  // 1 + 0.25 ulp rounded up: f = 0.25, up, error +0.75 ulp (ulp = 2^-7).
  const float x = bits_as_float(0x3f804000u);
  add_bf16(s, x, bf16{0x3f81});
  EXPECT_DOUBLE_EQ(s.mean_error(), 0.75 * 0x1p-7);
  EXPECT_NEAR(s.calibration_error(), 0.75, 1e-12);
}

// Uniform on [1, 2): ulp 2^-7, fraction f uniform. RZ errs by -f ulp: bias
// -2^-8, relative bias -2^-8 E[1/x] = -2^-8 ln 2. SR is unbiased and
// calibrated; RN's P(up) is a step at 1/2 (calibration error 1/4).
TEST(CastAudit, UniformOneTwo) {
  CastAuditConfig c;
  c.dist.a = 1.0;
  c.dist.b = 2.0;
  c.samples = 1 << 20;
  c.seed = 3;
  const std::vector<NamedStats> rows = run_cast_audit(c);
  const RoundingStats &rn = mode(rows, "RN"), &sr = mode(rows, "SR"), &rz = mode(rows, "RZ");
  EXPECT_EQ(rz.count(), c.samples);
  EXPECT_NEAR(rz.mean_error(), -0x1p-8, 0.01 * 0x1p-8);
  EXPECT_NEAR(rz.relative_bias(), -0x1p-8 * std::log(2.0), 0.01 * 0x1p-8);
  EXPECT_LT(rz.z_score(), -100);
  EXPECT_NEAR(rz.calibration_error(), 0.5, 0.01);
  EXPECT_LT(std::fabs(sr.z_score()), 5);
  EXPECT_LT(sr.calibration_error(), 0.01);
  EXPECT_LE(sr.max_abs_error(), 0x1p-7);
  EXPECT_LT(std::fabs(rn.z_score()), 5);
  EXPECT_NEAR(rn.calibration_error(), 0.25, 0.01);
  EXPECT_LE(rn.max_abs_error(), 0x1p-8);
  // SR's error spread: E|e| = E[2 f (1 - f)] ulp = ulp / 3.
  EXPECT_NEAR(sr.mean_abs_error(), 0x1p-7 / 3, 0.01 * 0x1p-7);
}

// A planted grid where round-to-nearest is biased: fractions 0.1..0.4 round
// down, 0.6 rounds up, so RN's mean error is -0.12 ulp; SR on the same values
// stays unbiased.
TEST(CastAudit, RoundNearestBiasOnSkewedGrid) {
  const double fractions[] = {0.1, 0.2, 0.3, 0.4, 0.6};
  RoundingStats rn, sr;
  uint64_t index = 0;
  for (int rep = 0; rep < 200; ++rep) {
    for (int k = 0; k < 100; ++k) {
      for (double f : fractions) {
        const float x = float(1.0 + (k + f) * 0x1p-7);
        add_bf16(rn, x, float_to_bf16_rn(x));
        add_bf16(sr, x, float_to_bf16_sr(x, sr_bits16(5, RngPurpose::kCast, 0, index++)));
      }
    }
  }
  EXPECT_NEAR(rn.mean_error(), -0.12 * 0x1p-7, 1e-4 * 0x1p-7);
  EXPECT_LT(rn.z_score(), -50);
  EXPECT_LT(std::fabs(sr.z_score()), 5);
  EXPECT_LT(std::fabs(sr.mean_error()), 0.01 * 0x1p-7);
}

TEST(CastAudit, SameResultForAnyThreadCount) {
  CastAuditConfig c;
  c.dist.dist = Dist::kNormal;
  c.samples = 300'001;  // several chunks and a partial one
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<NamedStats> one = run_cast_audit(c);
  omp_set_num_threads(2);
  const std::vector<NamedStats> two = run_cast_audit(c);
  omp_set_num_threads(before);
  ASSERT_EQ(markdown_table(one), markdown_table(two));
  for (size_t m = 0; m < one.size(); ++m) {
    EXPECT_EQ(one[m].stats.mean_error(), two[m].stats.mean_error()) << one[m].mode;
    EXPECT_EQ(one[m].stats.z_score(), two[m].stats.z_score()) << one[m].mode;
  }
}

TEST(CastAudit, Distributions) {
  DistParams p;
  p.dist = Dist::kLogUniform;
  p.emin = -3;
  p.emax = 5;
  for (uint64_t i = 0; i < 10000; ++i) {
    const float x = sample(p, 1, i);
    ASSERT_GE(x, 0.125f);
    ASSERT_LE(x, 32.0f);
  }
  p.dist = Dist::kUniform;
  p.a = -2;
  p.b = 3;
  double sum = 0;
  for (uint64_t i = 0; i < 100000; ++i) {
    const float x = sample(p, 1, i);
    ASSERT_GE(x, -2.0f);
    ASSERT_LE(x, 3.0f);
    sum += x;
  }
  // Mean 0.5, sd 5/sqrt(12): 5 standard errors = 0.023.
  EXPECT_NEAR(sum / 100000, 0.5, 0.023);
  EXPECT_EQ(sample(p, 1, 77), sample(p, 1, 77));
  EXPECT_NE(sample(p, 1, 77), sample(p, 2, 77));
}

TEST(CastAudit, RejectsBadSettings) {
  CastAuditConfig c;
  c.samples = 0;
  EXPECT_THROW(validate(c), std::invalid_argument);
  c.samples = 10;
  c.dist.a = 1;
  c.dist.b = 1;
  EXPECT_THROW(validate(c), std::invalid_argument);
  c.dist = DistParams{};
  c.dist.dist = Dist::kNormal;
  c.dist.sigma = -1;
  EXPECT_THROW(validate(c), std::invalid_argument);
  c.dist.sigma = 1e38;
  EXPECT_THROW(validate(c), std::invalid_argument) << "samples could overflow float";
  c.dist = DistParams{};
  c.dist.dist = Dist::kLogUniform;
  c.dist.emin = 4;
  c.dist.emax = 4;
  EXPECT_THROW(validate(c), std::invalid_argument);
  EXPECT_THROW(parse_dist("cauchy"), std::invalid_argument);
  EXPECT_EQ(parse_dist("loguniform"), Dist::kLogUniform);
}

// ---- the binary ---------------------------------------------------------

struct ProcessResult {
  int code;
  std::string out;
};

// Runs sr-audit with `args`; captures stdout, or stderr when `stderr_only`.
ProcessResult sr_audit(const std::string& args, bool stderr_only = false) {
  const std::string cmd = std::string(SRKIT_BIN_DIR) + "/sr-audit " + args +
                          (stderr_only ? " 2>&1 >/dev/null" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("popen failed: " + cmd);
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, got);
  const int status = pclose(p);
  return ProcessResult{WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(SrAuditBinary, BadFlagsExitTwoWithOneLine) {
  const char* bad[] = {"cast -n 0",           "cast --samples abc",
                       "cast --a 1 --b 0",    "cast --dist normal --sigma 0",
                       "cast --dist cauchy",  "cast --dist loguniform --emin 2 --emax 1",
                       "cast --no-such-flag", "cast --threads -1",
                       "no-such-command",     ""};
  for (const char* args : bad) {
    const ProcessResult r = sr_audit(args, /*stderr_only=*/true);
    EXPECT_EQ(r.code, 2) << args;
    ASSERT_FALSE(r.out.empty()) << args;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line for '" << args << "': " << r.out;
  }
}

TEST(SrAuditBinary, CastPrintsTable) {
  const ProcessResult r = sr_audit("cast -n 1000 --seed 7 --threads 2");
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("| mode | mean error (bias) | z | relative bias | mean abs error | "
                       "max abs error | P(up) calibration |"),
            std::string::npos)
      << r.out;
  for (const char* row : {"| RN |", "| SR |", "| RZ |"}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row;
  }
  EXPECT_EQ(r.out, sr_audit("cast -n 1000 --seed 7 --threads 1").out) << "thread count leaked";
}

TEST(SrAuditBinary, HelpAndVersion) {
  const ProcessResult version = sr_audit("--version");
  EXPECT_EQ(version.code, 0);
  EXPECT_EQ(version.out.rfind("sr-audit ", 0), 0u) << version.out;
  const ProcessResult help = sr_audit("cast --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--dist"), std::string::npos);
}

}  // namespace
}  // namespace srkit::audit
