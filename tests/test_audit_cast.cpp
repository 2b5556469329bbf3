// sr-audit's statistics (lib/audit) on cases with known answers, and the
// sr-audit binary's command line (exit codes, table).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/sr_bits.h"
#include "lib/audit/cast_audit.h"
#include "lib/audit/distribution.h"
#include "lib/audit/rounding_stats.h"
#include "tests/run_command.h"
#include "tests/test_paths.h"

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
  s.add(10.0, 11.0, 0.5, true, 2.0);   // error +1
  s.add(10.0, 9.0, 0.5, false, 2.0);   // error -1
  s.add(-4.0, -2.0, 0.25, true, 2.0);  // error +2
  EXPECT_EQ(s.count(), 3u);
  EXPECT_DOUBLE_EQ(s.mean_error(), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.mean_abs_error(), 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.max_abs_error(), 2.0);
  EXPECT_DOUBLE_EQ(s.relative_bias(), (0.1 - 0.1 + 0.5) / 3.0);
  // Population variance 14/9: z = (2/3) / sqrt(14/9 / 3).
  EXPECT_NEAR(s.z_score(), (2.0 / 3.0) / std::sqrt(14.0 / 27.0), 1e-12);
  // Bucket of f = 0.5: P(up) = 1/2 = f; bucket of f = 0.25: P(up) = 1, off by 0.75.
  EXPECT_NEAR(s.calibration_error(), 0.75 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(s.mean_error_ulps(), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.mse(), 2.0);
  EXPECT_NEAR(s.error_variance(), 14.0 / 9.0, 1e-12);
  // Theory: f(1-f) ulp^2 = 1, 1, 0.75 -> mean 11/12.
  EXPECT_NEAR(s.variance_ratio(), (14.0 / 9.0) / (11.0 / 12.0), 1e-12);
  // Bucket 8 (f = 0.5): 1 up, expected 1, variance 0.5 -> 0; bucket 4
  // (f = 0.25): 1 up, expected 0.25, variance 0.1875 -> 0.5625 / 0.1875 = 3.
  EXPECT_NEAR(s.chi_square(), 3.0, 1e-12);
  EXPECT_EQ(s.chi_square_dof(), 2);
  // Overflow to Inf is counted apart and leaves the sums alone.
  s.add(1.0, INFINITY, 0.9, true, 1.0);
  EXPECT_EQ(s.count(), 3u);
  EXPECT_EQ(s.overflows(), 1u);
  EXPECT_DOUBLE_EQ(s.mean_error(), 2.0 / 3.0);
}

TEST(RoundingStats, MergeEqualsOnePass) {
  RoundingStats all, a, b;
  for (int i = 0; i < 1000; ++i) {
    const double x = 1.0 + i * 1e-3, q = x + ((i % 7) - 3) * 1e-4;
    const double f = (i % 13) / 13.0;
    all.add(x, q, f, i % 2 == 0, 1e-3);
    (i < 400 ? a : b).add(x, q, f, i % 2 == 0, 1e-3);
  }
  a.merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_NEAR(a.mean_error(), all.mean_error(), 1e-15);
  EXPECT_NEAR(a.z_score(), all.z_score(), 1e-9);
  EXPECT_EQ(a.max_abs_error(), all.max_abs_error());
  EXPECT_NEAR(a.calibration_error(), all.calibration_error(), 1e-12);
  EXPECT_NEAR(a.chi_square(), all.chi_square(), 1e-9);
  EXPECT_NEAR(a.variance_ratio(), all.variance_ratio(), 1e-12);
  for (int k = 0; k < RoundingStats::kErrorBins; ++k) EXPECT_EQ(a.error_bin(k), all.error_bin(k));
}

// add_batch against add() input by input: counts and histograms exactly, sums
// to rounding (they are taken in lanes). Batches of every length mod 4 (the
// tail path), with non-finite roundings inside and not inside a batch (the
// per-bucket summary is used only when a batch has none), and zero inputs.
TEST(RoundingStats, AddBatchEqualsAddPerInput) {
  for (size_t n : {size_t(1), size_t(3), size_t(4), size_t(7), size_t(255), size_t(256)}) {
    for (bool with_overflow : {false, true}) {
      RoundingStats one, batched;
      RoundingStats::InputBatch in;
      std::vector<float> q(n);
      std::vector<uint8_t> up(n);
      for (size_t i = 0; i < n; ++i) {
        const double x = i % 11 == 0 ? 0.0 : (i % 2 ? -1.0 : 1.0) * (0.5 + 0.37 * double(i));
        const double ulp = 0x1p-7 * std::exp2(std::floor(std::log2(std::fabs(x) + 1)));
        const double f = double((i * 7) % 16) / 16.0 + 1.0 / 64;
        const bool overflow = with_overflow && i % 5 == 2;
        q[i] = overflow ? INFINITY : float(x + ((i % 3) - 1.0) * ulp * 0.5);
        up[i] = uint8_t(i % 3 == 2);
        in.set(i, x, f, ulp);
        one.add(RoundingStats::Input::make(x, f, ulp), double(q[i]), up[i] != 0);
      }
      in.summarize(n);
      batched.add_batch(in, q.data(), up.data());
      SCOPED_TRACE("n=" + std::to_string(n) + " overflow=" + std::to_string(with_overflow));
      EXPECT_EQ(batched.count(), one.count());
      EXPECT_EQ(batched.overflows(), one.overflows());
      EXPECT_NEAR(batched.mean_error(), one.mean_error(),
                  1e-12 * (1 + std::fabs(one.mean_error())));
      EXPECT_NEAR(batched.mse(), one.mse(), 1e-12 * one.mse());
      EXPECT_EQ(batched.max_abs_error(), one.max_abs_error());
      EXPECT_NEAR(batched.mean_error_ulps(), one.mean_error_ulps(), 1e-12);
      EXPECT_NEAR(batched.relative_bias(), one.relative_bias(), 1e-12);
      EXPECT_NEAR(batched.variance_ratio(), one.variance_ratio(), 1e-9);
      EXPECT_NEAR(batched.chi_square(), one.chi_square(), 1e-9 * (1 + one.chi_square()));
      for (int b = 0; b < RoundingStats::kFractionBuckets; ++b) {
        EXPECT_EQ(batched.bucket_count(b), one.bucket_count(b)) << b;
        if (one.bucket_count(b)) {
          EXPECT_NEAR(batched.bucket_mean_f(b), one.bucket_mean_f(b), 1e-12) << b;
          EXPECT_EQ(batched.bucket_p_up(b), one.bucket_p_up(b)) << b;
        }
      }
      for (int k = 0; k < RoundingStats::kErrorBins; ++k) {
        EXPECT_EQ(batched.error_bin(k), one.error_bin(k)) << k;
      }
    }
  }
}

TEST(RoundingStats, SummarizeRefusesMoreThanABatch) {
  RoundingStats::InputBatch in;
  EXPECT_THROW(in.summarize(RoundingStats::InputBatch::kMax + 1), std::logic_error);
}

// Sampler::fill gives sample()'s values bit for bit, for every distribution,
// from starts that are not multiples of the generator's 32 blocks.
TEST(Sampler, FillEqualsSampleForEveryDistribution) {
  for (Dist d : {Dist::kUniform, Dist::kNormal, Dist::kLogUniform, Dist::kGrid}) {
    DistParams p;
    p.dist = d;
    for (FpFormat f : {FpFormat::kBf16, FpFormat::kE4M3}) {
      const Sampler sampler(p, 9, f);
      for (uint64_t first : {uint64_t(0), uint64_t(5), uint64_t(1) << 33}) {
        std::vector<float> x(77);
        sampler.fill(first, x.size(), x.data());
        for (size_t k = 0; k < x.size(); ++k) {
          ASSERT_EQ(float_as_bits(x[k]), float_as_bits(sample(p, 9, first + k, f)))
              << dist_name(d) << " " << fp_format_name(f) << " index " << first + k;
        }
      }
    }
  }
}

TEST(Bf16Fraction, FractionAndDirection) {
  RoundingStats s;
  // 1 + 0.25 ulp rounded up: f = 0.25, up, error +0.75 ulp (ulp = 2^-7).
  const float x = bits_as_float(0x3f804000u);
  const Bracket b = bracket(FpFormat::kBf16, x);
  EXPECT_EQ(b.f, 0.25);
  EXPECT_EQ(b.ulp, 0x1p-7);
  add_rounding(s, b, x, bf16_to_float(bf16{0x3f81}));
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
        const Bracket b = bracket(FpFormat::kBf16, x);
        add_rounding(rn, b, x, bf16_to_float(float_to_bf16_rn(x)));
        add_rounding(
            sr, b, x,
            bf16_to_float(float_to_bf16_sr(x, sr_bits16(5, RngPurpose::kCast, 0, index++))));
      }
    }
  }
  EXPECT_NEAR(rn.mean_error(), -0.12 * 0x1p-7, 1e-4 * 0x1p-7);
  EXPECT_LT(rn.z_score(), -50);
  EXPECT_LT(std::fabs(sr.z_score()), 5);
  EXPECT_LT(std::fabs(sr.mean_error()), 0.01 * 0x1p-7);
}

constexpr FpFormat kAllFormats[] = {FpFormat::kBf16, FpFormat::kFp16, FpFormat::kE4M3,
                                    FpFormat::kE5M2};

// The grid puts inputs exactly (to float precision) at the chosen fractions
// between two neighbours of each format, inside its normal range.
TEST(CastAudit, GridHitsChosenFractions) {
  DistParams p;
  p.dist = Dist::kGrid;
  p.fractions = {0.1, 0.25, 0.9};
  for (FpFormat f : kAllFormats) {
    for (uint64_t i = 0; i < 3000; ++i) {
      const float x = sample(p, 4, i, f);
      ASSERT_GT(x, 0.0f);
      ASSERT_LT(x, fp_format_max(f)) << fp_format_name(f);
      EXPECT_NEAR(bracket(f, x).f, p.fractions[i % 3], 1e-4) << fp_format_name(f) << " " << x;
    }
  }
  // e4m3's normals start at 2^-6: the default [-8, 8) is clipped, [-8, -6) is empty.
  int lo, hi;
  grid_exponents(p, FpFormat::kE4M3, &lo, &hi);
  EXPECT_EQ(lo, -6);
  EXPECT_EQ(hi, 8);
  p.emax = -6;
  EXPECT_THROW(grid_exponents(p, FpFormat::kE4M3, &lo, &hi), std::invalid_argument);
  EXPECT_NO_THROW(grid_exponents(p, FpFormat::kBf16, &lo, &hi));
}

// Known answers on the skewed grid f in {0.1, 0.2, 0.3, 0.4, 0.6}, per format:
// RN rounds the first four down and 0.6 up, bias -0.12 ulp; RZ errs by -f,
// bias -0.32 ulp; SR is unbiased, calibrated (chi-square with 5 dof) and its
// error variance is f(1-f) ulp^2 (ratio 1). On one binade (one ulp) RN's
// variance ratio is known too: (E[e^2] - bias^2) / E[f(1-f)] in ulps^2 =
// (0.46 / 5 - 0.12^2) / (0.94 / 5).
TEST(CastAudit, SkewedGridKnownAnswersPerFormat) {
  for (FpFormat f : kAllFormats) {
    CastAuditConfig c;
    c.format = f;
    c.dist.dist = Dist::kGrid;
    c.dist.fractions = {0.1, 0.2, 0.3, 0.4, 0.6};
    c.dist.emin = 0;
    c.dist.emax = 1;
    c.samples = 400'000;
    c.seed = 11;
    const std::vector<NamedStats> rows = run_cast_audit(c);
    const RoundingStats &rn = mode(rows, "RN"), &sr = mode(rows, "SR"), &rz = mode(rows, "RZ");
    SCOPED_TRACE(fp_format_name(f));
    EXPECT_EQ(rows[0].format, fp_format_name(f));
    EXPECT_EQ(rn.count(), c.samples);
    EXPECT_NEAR(rn.mean_error_ulps(), -0.12, 1e-4);
    EXPECT_NEAR(rz.mean_error_ulps(), -0.32, 1e-4);
    EXPECT_FALSE(rn.unbiased());
    EXPECT_FALSE(rz.unbiased());
    EXPECT_FALSE(rn.calibrated());
    EXPECT_EQ(rn.chi_square_dof(), 5);
    EXPECT_NE(rn.verdict("RN").find("RN: biased (z = -"), std::string::npos) << rn.verdict("RN");
    EXPECT_TRUE(sr.unbiased()) << sr.verdict("SR");
    EXPECT_TRUE(sr.calibrated()) << sr.verdict("SR");
    EXPECT_NE(sr.verdict("SR").find("SR: unbiased at 99.99% (|z| = "), std::string::npos);
    // SD of the variance ratio estimate: ~sqrt(2 / n) per bucket: 0.01 is > 4 SDs.
    EXPECT_NEAR(sr.variance_ratio(), 1.0, 0.01);
    EXPECT_LT(std::fabs(sr.mean_error_ulps()), 0.005);
    EXPECT_NEAR(rn.variance_ratio(), (0.46 / 5 - 0.0144) / (0.94 / 5), 0.002);
  }
}

// A planted bias: a rounding that goes up with probability f + 0.02 (a 2%
// calibration error, 0.02 ulp of bias) must be flagged by both the z-score and
// the chi-square, for every format; fair SR on the same inputs must not.
TEST(CastAudit, PlantedBiasIsFlagged) {
  for (FpFormat f : kAllFormats) {
    DistParams p;
    p.dist = Dist::kUniform;
    p.a = 1.0;
    p.b = 8.0;
    RoundingStats planted, fair;
    for (uint64_t i = 0; i < 200'000; ++i) {
      const float x = sample(p, 21, i, f);
      const Bracket b = bracket(f, x);
      const uint32_t r = sr_bits16(21, RngPurpose::kCast, 0, i);
      const float down = float(b.low_magnitude), up = float(b.low_magnitude + b.ulp);
      const bool go_up = double(r) / 65536.0 < b.f + 0.02;
      add_rounding(planted, b, x, go_up ? up : down);
      add_rounding(fair, b, x, fp_round(f, RoundMode::kSR, x, r));
    }
    SCOPED_TRACE(fp_format_name(f));
    EXPECT_FALSE(planted.unbiased()) << planted.verdict("planted");
    EXPECT_FALSE(planted.calibrated()) << planted.verdict("planted");
    EXPECT_NEAR(planted.calibration_error(), 0.02, 0.003);
    EXPECT_TRUE(fair.unbiased()) << fair.verdict("SR");
    EXPECT_TRUE(fair.calibrated()) << fair.verdict("SR");
    EXPECT_NEAR(fair.variance_ratio(), 1.0, 0.02);
  }
}

// Every format's SR on a continuous distribution: unbiased, calibrated over
// all 16 buckets, variance ratio 1; normal inputs include the subnormal range
// of the fp8 formats (where the ulp is fixed).
TEST(CastAudit, SrUnbiasedOnNormalInputsPerFormat) {
  for (FpFormat f : kAllFormats) {
    CastAuditConfig c;
    c.format = f;
    c.dist.dist = Dist::kNormal;
    c.samples = 300'000;
    const RoundingStats sr = mode(run_cast_audit(c), "SR");
    SCOPED_TRACE(fp_format_name(f));
    EXPECT_TRUE(sr.unbiased()) << sr.verdict("SR");
    EXPECT_TRUE(sr.calibrated()) << sr.verdict("SR");
    EXPECT_EQ(sr.chi_square_dof(), RoundingStats::kFractionBuckets);
    EXPECT_NEAR(sr.variance_ratio(), 1.0, 0.02);
    EXPECT_EQ(sr.overflows(), 0u);
  }
}

// Inputs beyond the largest finite value leave the statistics, counted apart.
TEST(CastAudit, OutOfRangeCounted) {
  CastAuditConfig c;
  c.format = FpFormat::kE4M3;
  c.dist.a = 0;
  c.dist.b = 896;  // half of the inputs above 448
  c.samples = 100'000;
  const std::vector<NamedStats> rows = run_cast_audit(c);
  for (const NamedStats& r : rows) {
    EXPECT_EQ(r.stats.count() + r.stats.overflows(), c.samples) << r.mode;
    EXPECT_NEAR(double(r.stats.overflows()) / double(c.samples), 0.5, 0.01) << r.mode;
    EXPECT_LE(r.stats.max_abs_error(), 32.0) << r.mode;  // within one ulp of [256, 448]
  }
}

TEST(CastAudit, FractionsParsing) {
  EXPECT_EQ(parse_fractions("0.1,0.5"), (std::vector<double>{0.1, 0.5}));
  for (const char* bad : {"", "0", "1", "0.5,", "abc", "0.2,1.5", "-0.1", "0.5x"}) {
    EXPECT_THROW(parse_fractions(bad), std::invalid_argument) << bad;
  }
  EXPECT_EQ(parse_dist("grid"), Dist::kGrid);
}

TEST(CastAudit, SameResultForAnyThreadCount) {
  CastAuditConfig c;
  c.dist.dist = Dist::kNormal;
  c.samples = 300'001;  // several chunks and a partial one
  for (FpFormat f : {FpFormat::kBf16, FpFormat::kE5M2}) {
    c.format = f;
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
      EXPECT_EQ(one[m].stats.chi_square(), two[m].stats.chi_square()) << one[m].mode;
      EXPECT_EQ(one[m].stats.variance_ratio(), two[m].stats.variance_ratio()) << one[m].mode;
    }
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

// Runs sr-audit with `args`; its stdout, or its stderr when `stderr_only`.
ProcessResult sr_audit(const std::string& args, bool stderr_only = false) {
  const srkit::testing_process::SplitResult r =
      srkit::testing_process::run_command_split(std::string(SRKIT_BIN_DIR) + "/sr-audit " + args);
  return ProcessResult{r.code, stderr_only ? r.err : r.out};
}

TEST(SrAuditBinary, BadFlagsExitTwoWithOneLine) {
  const char* bad[] = {"cast -n 0",
                       "cast --samples abc",
                       "cast --a 1 --b 0",
                       "cast --dist normal --sigma 0",
                       "cast --dist cauchy",
                       "cast --dist loguniform --emin 2 --emax 1",
                       "cast --no-such-flag",
                       "cast --threads -1",
                       "no-such-command",
                       "",
                       "cast --format fp12",
                       "cast --format bf16,",
                       "cast --format all -n 0",
                       "cast --dist grid --fractions 0,0.5",
                       "cast --dist grid --fractions 0.5,1",
                       "cast --dist grid --fractions abc",
                       "cast --dist grid --fractions ''",
                       "cast --dist grid --format e4m3 --emin 9 --emax 12",
                       "cast --dist grid --emin 3 --emax 3",
                       "cast --svg-kind pie",
                       "cast --dist uniform --a 2 --b 2 --format fp16"};
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
  EXPECT_NE(r.out.find("| format | mode | mean error (bias) | bias (ulps) | z | relative bias | "
                       "MSE | var / f(1-f)ulp^2 | mean abs error | max abs error | "
                       "P(up) calibration | chi2 (dof) |"),
            std::string::npos)
      << r.out;
  for (const char* row : {"| bf16 | RN |", "| bf16 | SR |", "| bf16 | RZ |"}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row;
  }
  EXPECT_EQ(r.out, sr_audit("cast -n 1000 --seed 7 --threads 1").out) << "thread count leaked";
}

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SrAuditBinary, CastAllFormatsJsonAndSvg) {
  const std::filesystem::path dir = testing_paths::fresh_dir("audit_cast", "files");
  const std::string json = (dir / "c.json").string(), hist = (dir / "h.svg").string(),
                    cal = (dir / "c.svg").string();
  const ProcessResult r = sr_audit(
      "cast --format all --dist grid --fractions 0.1,0.2,0.3,0.4,0.6 "
      "-n 1e5 --threads 2 --json " +
      json + " --svg " + hist);
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(count(r.out, ": unbiased at 99.99% (|z| = "), 4u) << r.out;  // SR per format
  EXPECT_EQ(count(r.out, " RN: biased (z = -"), 4u) << r.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  ASSERT_EQ(j["rows"].size(), 12u);
  for (const auto& row : j["rows"]) {
    if (row["mode"] == "RN") {
      EXPECT_NEAR(row["bias_ulps"].get<double>(), -0.12, 1e-3);
    }
    if (row["mode"] == "SR") {
      EXPECT_TRUE(row["unbiased"].get<bool>());
    }
    EXPECT_EQ(row["chi_square_dof"], 5);
    EXPECT_EQ(row["fraction_buckets"].size(), 5u);
  }
  const std::string h = slurp(hist);
  EXPECT_EQ(count(h, "<g class=\"series\""), 12u);
  EXPECT_EQ(h.rfind("</svg>\n"), h.size() - 7);
  EXPECT_NE(h.find("e4m3 SR"), std::string::npos);
  ASSERT_EQ(sr_audit("cast -n 1e5 --svg " + cal + " --svg-kind calibration").code, 0);
  const std::string c = slurp(cal);
  EXPECT_EQ(count(c, "<polyline class=\"series\""), 4u);  // ideal + RN, SR, RZ
  EXPECT_NE(c.find("ideal (P = f)"), std::string::npos);
  std::filesystem::remove_all(dir);
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
