// The fused AdamW step on the CPU (kernels/cpu/adamw.h) and its per-element
// math (kernels/common/adamw.h): against a double-precision reference of the
// formula, against the element function applied one element at a time with
// sr_bits16 (bit for bit), and the numerics the strategies exist for: SR is
// unbiased where RN erases, Kahan tracks a sum RN loses, rem16 is an exact
// fp32 master. Results must not depend on threads or sharding.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/adamw.h"
#include "kernels/common/sr_bits.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/cpu_isa.h"
#include "lib/precision.h"
#include "tests/adamw_element_reference.h"

namespace {

using namespace srkit;
using srkit::testing::AdamWElementByElement;
using srkit::testing::decays;
using srkit::testing::expect_telemetry_eq;

const std::vector<std::string>& kSpecs = srkit::testing::kAdamWRuleSpecs;

float load(const std::vector<uint8_t>& buf, DType t, size_t i) {
  if (t == DType::kF32) {
    float x;
    std::memcpy(&x, buf.data() + 4 * i, 4);
    return x;
  }
  bf16 h;
  std::memcpy(&h, buf.data() + 2 * i, 2);
  return bf16_to_float(h);
}

void store(std::vector<uint8_t>& buf, DType t, size_t i, float x) {
  if (t == DType::kF32) {
    std::memcpy(buf.data() + 4 * i, &x, 4);
  } else {
    const bf16 h = float_to_bf16_rn(x);
    std::memcpy(buf.data() + 2 * i, &h, 2);
  }
}

// Host arrays of one rule, with element accessors in fp32.
struct State {
  State(const AdamWRule& r, size_t n) : rule(r), n(n) {
    const AdamWArrayBytes b = adamw_array_bytes(r);
    w.resize(b.weights * n);
    g.resize(b.grads * n);
    master.resize(b.master * n);
    m.resize(b.m * n);
    v.resize(b.v * n);
    kahan.resize(b.kahan * n);
  }

  // Arrays starting at element `offset` (a shard's slices).
  AdamWBuffers at(size_t offset) {
    const AdamWArrayBytes b = adamw_array_bytes(rule);
    auto p = [offset](std::vector<uint8_t>& buf, size_t es) -> void* {
      return buf.empty() ? nullptr : buf.data() + offset * es;
    };
    return {p(w, b.weights), p(g, b.grads), p(master, b.master),
            p(m, b.m),       p(v, b.v),     p(kahan, b.kahan)};
  }

  float weight(size_t i) const { return load(w, rule.weights, i); }
  float grad(size_t i) const { return load(g, rule.grads, i); }
  float m_at(size_t i) const { return load(m, rule.m, i); }
  float v_at(size_t i) const { return load(v, rule.v, i); }
  float kahan_at(size_t i) const { return load(kahan, DType::kBF16, i); }
  // The fp32 value the update applies to: master where there is one.
  float master_at(size_t i) const {
    if (rule.master == MasterKind::kF32) return load(master, DType::kF32, i);
    if (rule.master == MasterKind::kRem16) {
      bf16 h;
      int16_t r;
      std::memcpy(&h, w.data() + 2 * i, 2);
      std::memcpy(&r, master.data() + 2 * i, 2);
      return rem16_join(h, r);
    }
    return weight(i);
  }
  void set_master(size_t i, float x) {
    if (rule.master == MasterKind::kF32) {
      store(master, DType::kF32, i, x);
      store(w, DType::kBF16, i, x);
    } else if (rule.master == MasterKind::kRem16) {
      const Rem16 s = rem16_split(x);
      std::memcpy(w.data() + 2 * i, &s.w, 2);
      std::memcpy(master.data() + 2 * i, &s.r, 2);
    } else {
      store(w, rule.weights, i, x);
    }
  }

  // Random GPT-like values: weights around 0 and around 1 (gains), some zero grads.
  void randomize(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t i = 0; i < n; ++i) {
      set_master(i, (i % 5 == 0 ? 1.0f : 0.0f) + 0.05f * normal(rng));
      store(g, rule.grads, i, i % 11 == 0 ? 0.0f : 1e-2f * normal(rng));
      store(m, rule.m, i, 1e-3f * normal(rng));
      const float s = 1e-2f * normal(rng);
      store(v, rule.v, i, s * s);
      if (!kahan.empty()) store(kahan, DType::kBF16, i, 1e-5f * normal(rng));
    }
  }
  void randomize_grads(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1e-2f);
    for (size_t i = 0; i < n; ++i) store(g, rule.grads, i, normal(rng));
  }

  bool same_bits(const State& o) const {
    return w == o.w && g == o.g && master == o.master && m == o.m && v == o.v && kahan == o.kahan;
  }

  AdamWRule rule;
  size_t n;
  std::vector<uint8_t> w, g, master, m, v, kahan;
};

AdamWRule rule_of(const std::string& spec) { return strategy_from_string(spec).rule; }

AdamWHyper hyper(uint64_t step, float lr = 1e-3f) {
  AdamWHyper h{};
  h.lr = lr;
  h.beta1 = 0.9f;
  h.beta2 = 0.95f;
  h.eps = 1e-8f;
  h.weight_decay = 0.1f;
  h.bias_correction1 = 1.0f - std::pow(h.beta1, float(step));
  h.bias_correction2 = 1.0f - std::pow(h.beta2, float(step));
  h.grad_scale = 0.75f;
  h.seed = 0x5eed;
  h.step = step;
  return h;
}

// Three segments with an odd boundary: decay, no decay, decay.
std::vector<ParamSegment> segments(size_t n) {
  const size_t a = n / 3 + 5, b = 2 * n / 3 + 1;
  return {{0, a, true}, {a, b - a, false}, {b, n - b, true}};
}

// ---- double-precision reference of the formula -----------------------------
struct Reference {
  double m, v, update, weight;   // new values
  double m_scale, update_scale;  // magnitudes for tolerances (sums of |terms|)
};

Reference reference(float g_in, float m_in, float v_in, float w_in, bool decay,
                    const AdamWHyper& h) {
  const double g = double(g_in) * h.grad_scale;
  const double b1 = h.beta1, b2 = h.beta2;
  Reference r;
  r.m = b1 * m_in + (1 - b1) * g;
  r.m_scale = std::fabs(b1 * m_in) + std::fabs((1 - b1) * g);
  r.v = b2 * v_in + (1 - b2) * g * g;
  const double dir = (r.m / h.bias_correction1) / (std::sqrt(r.v / h.bias_correction2) + h.eps);
  const double wd = decay ? double(h.weight_decay) * w_in : 0.0;
  r.update = -double(h.lr) * (dir + wd);
  r.update_scale = double(h.lr) * (std::fabs(dir) + std::fabs(wd));
  r.weight = double(w_in) + r.update;
  return r;
}

// fp32 arithmetic in the kernel differs from the double formula by a few fp32
// ulps of the terms involved.
constexpr double kRel = 1e-6;

// The bf16 values bracketing x (equal when x is a bf16).
void bf16_bracket(float x, float& down, float& up) {
  const bf16 z = float_to_bf16_rz(x);
  const float t = bf16_to_float(z);
  if (t == x) {
    down = up = t;
    return;
  }
  const float away = bf16_to_float(bf16{uint16_t(z.bits + 1)});
  down = x > 0 ? t : away;
  up = x > 0 ? away : t;
}

// RN of some value within tol of ref (RN is monotonic, so any bf16 between
// RN(ref - tol) and RN(ref + tol)): RN(ref) itself unless ref is near a tie or
// tol spans more than a bf16 spacing.
::testing::AssertionResult is_rn_of(float got, double ref, double tol) {
  const float lo = bf16_to_float(float_to_bf16_rn(float(ref - tol)));
  const float hi = bf16_to_float(float_to_bf16_rn(float(ref + tol)));
  if (got >= lo && got <= hi) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << got << " is not RN of " << ref << " (+-" << tol << "): expected " << lo << " or " << hi;
}

// One of the two bf16 neighbours of ref.
::testing::AssertionResult is_neighbour_of(float got, double ref, double tol) {
  float lo, hi, unused;
  bf16_bracket(float(ref - tol), lo, unused);
  bf16_bracket(float(ref + tol), unused, hi);
  if (got >= lo && got <= hi) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << got << " is not a bf16 neighbour of " << ref
                                       << ": expected in [" << lo << ", " << hi << "]";
}

::testing::AssertionResult is_close(float got, double ref, double tol) {
  if (std::fabs(double(got) - ref) <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << got << " differs from " << ref << " by more than " << tol;
}

// A stored moment against its reference, per dtype and rounding.
::testing::AssertionResult moment_ok(float got, double ref, double scale, DType t, bool sr) {
  const double tol = kRel * scale + 1e-30;
  if (t == DType::kF32) return is_close(got, ref, tol);
  return sr ? is_neighbour_of(got, ref, tol) : is_rn_of(got, ref, tol);
}

class AdamWSpec : public ::testing::TestWithParam<std::string> {};

TEST_P(AdamWSpec, MatchesDoublePrecisionReference) {
  const AdamWRule rule = rule_of(GetParam());
  const size_t n = 5000;
  State s(rule, n);
  s.randomize(11);
  const auto segs = segments(n);
  for (uint64_t step = 1; step <= 3; ++step) {
    State before = s;
    const AdamWHyper h = hyper(step);
    cpu::adamw_step(rule, s.at(0), segs.data(), segs.size(), 0, n, h, nullptr);
    for (size_t i = 0; i < n; ++i) {
      SCOPED_TRACE("step " + std::to_string(step) + " element " + std::to_string(i));
      const float w_in = before.master_at(i);
      const Reference r =
          reference(before.grad(i), before.m_at(i), before.v_at(i), w_in, decays(segs, i), h);
      ASSERT_TRUE(moment_ok(s.m_at(i), r.m, r.m_scale, rule.m, rule.m_sr));
      ASSERT_TRUE(moment_ok(s.v_at(i), r.v, r.v, rule.v, rule.v_sr));
      const double tol = kRel * (std::fabs(double(w_in)) * 1e-1 + r.update_scale) + 1e-30;
      switch (adamw_weight_mode(rule)) {
        case AdamWWeightMode::kF32:
          ASSERT_TRUE(is_close(s.weight(i), r.weight, tol + std::fabs(r.weight) * 0x1p-24));
          break;
        case AdamWWeightMode::kBF16RN:
          ASSERT_TRUE(is_rn_of(s.weight(i), r.weight, tol));
          break;
        case AdamWWeightMode::kBF16SR:
          ASSERT_TRUE(is_neighbour_of(s.weight(i), r.weight, tol));
          break;
        case AdamWWeightMode::kMasterF32:
        case AdamWWeightMode::kRem16: {
          const float master = s.master_at(i);
          ASSERT_TRUE(is_close(master, r.weight, tol + std::fabs(r.weight) * 0x1p-24));
          // The forward weight is the nearest bf16 of the master (rem16: at an
          // exact tie, the neighbour its 16-bit remainder can express).
          const float rn = bf16_to_float(float_to_bf16_rn(master));
          const bool tie = (float_as_bits(master) & 0xffffu) == 0x8000u;
          if (rule.master == MasterKind::kF32 || !tie) {
            ASSERT_EQ(s.weight(i), rn);
          } else {
            ASSERT_TRUE(is_rn_of(s.weight(i), master, std::fabs(master) * 1e-3));
          }
          break;
        }
        case AdamWWeightMode::kKahan: {
          const double y = r.update - before.kahan_at(i);
          ASSERT_TRUE(is_rn_of(s.weight(i), double(w_in) + y, tol));
          const double c = (double(s.weight(i)) - w_in) - y;
          ASSERT_TRUE(is_rn_of(s.kahan_at(i), c, tol));
          break;
        }
      }
    }
  }
}

// The CPU sums squares in fp32 within a tile (fp64 across tiles): ~1e-6 relative.
constexpr double kSumRel = 1e-5;

// Two steps of the fused pass from `fused`, each the same bits as the element
// function applied one element at a time; with `telemetry`, the same sums too
// (within kSumRel).
void expect_two_steps_equal_element_by_element(const AdamWRule& rule, State fused, size_t begin,
                                               size_t n, const std::vector<ParamSegment>& segs,
                                               bool telemetry) {
  for (uint64_t step = 1; step <= 2; ++step) {
    State single = fused;
    const AdamWHyper h = hyper(step);
    AdamWTelemetry tel;
    cpu::adamw_step(rule, fused.at(begin), segs.data(), segs.size(), begin, n, h,
                    telemetry ? &tel : nullptr);
    AdamWElementByElement ref{single.at(begin), segs, begin, n, h};
    adamw_dispatch(rule, ref);
    ASSERT_TRUE(fused.same_bits(single)) << "step " << step;
    if (telemetry) {
      expect_telemetry_eq(tel, ref.tel, kSumRel);
      EXPECT_GT(tel.nonzero, 0u);
    }
  }
}

TEST_P(AdamWSpec, FusedPassEqualsElementByElement) {
  const AdamWRule rule = rule_of(GetParam());
  // Two 64K chunks and a partial one; a shard starting mid SR group.
  const size_t n = 2 * 65536 + 4099, begin = 13;
  State fused(rule, n);
  fused.randomize(21);
  ASSERT_NO_FATAL_FAILURE(
      expect_two_steps_equal_element_by_element(rule, fused, begin, n, segments(n), true));
}

// Steps without telemetry run AVX-512 loops where the CPU has them
// (kernels/cpu/cpu_isa.h): on every ISA the CPU runs, the same bits as the
// element function one element at a time; with telemetry, the same sums too.
TEST_P(AdamWSpec, EveryInstructionSetStoresTheSameBits) {
  const AdamWRule rule = rule_of(GetParam());
  const size_t n = 2 * 65536 + 4099, begin = 13;
  State start(rule, n);
  start.randomize(23);
  const auto segs = segments(n);
  AdamWTelemetry first_tel{};
  for (cpu::CpuIsa isa : cpu::runnable_cpu_isas()) {
    const cpu::ScopedCpuIsa forced(isa);
    SCOPED_TRACE(cpu::cpu_isa_name(isa));
    ASSERT_NO_FATAL_FAILURE(
        expect_two_steps_equal_element_by_element(rule, start, begin, n, segs, false));
    State with_tel = start;
    AdamWTelemetry tel;
    cpu::adamw_step(rule, with_tel.at(begin), segs.data(), segs.size(), begin, n, hyper(1), &tel);
    if (isa == cpu::CpuIsa::kAvx2) first_tel = tel;
    EXPECT_EQ(std::memcmp(&tel, &first_tel, sizeof tel), 0);
  }
}

TEST_P(AdamWSpec, ThreadCountInvariant) {
  const AdamWRule rule = rule_of(GetParam());
  const size_t n = 3 * 65536 + 1000;
  State one(rule, n);
  one.randomize(31);
  State two = one;
  const auto segs = segments(n);
  const int saved = omp_get_max_threads();
  AdamWTelemetry t1, t2;
  for (uint64_t step = 1; step <= 2; ++step) {
    omp_set_num_threads(1);
    cpu::adamw_step(rule, one.at(0), segs.data(), segs.size(), 0, n, hyper(step), &t1);
    omp_set_num_threads(2);
    cpu::adamw_step(rule, two.at(0), segs.data(), segs.size(), 0, n, hyper(step), &t2);
  }
  omp_set_num_threads(saved);
  EXPECT_TRUE(one.same_bits(two));
  // Bit-identical sums, not just close ones.
  EXPECT_EQ(std::memcmp(&t1, &t2, sizeof t1), 0);
}

TEST_P(AdamWSpec, ShardInvariant) {
  const AdamWRule rule = rule_of(GetParam());
  const size_t n = 70000, k = 8 * 4321;
  State whole(rule, n);
  whole.randomize(41);
  State sharded = whole;
  const auto segs = segments(n);
  for (uint64_t step = 1; step <= 2; ++step) {
    AdamWTelemetry all, lo, hi;
    cpu::adamw_step(rule, whole.at(0), segs.data(), segs.size(), 0, n, hyper(step), &all);
    cpu::adamw_step(rule, sharded.at(0), segs.data(), segs.size(), 0, k, hyper(step), &lo);
    cpu::adamw_step(rule, sharded.at(k), segs.data(), segs.size(), k, n, hyper(step), &hi);
    ASSERT_TRUE(whole.same_bits(sharded)) << "step " << step;
    AdamWTelemetry both = lo;
    both.n += hi.n;
    both.nonzero += hi.nonzero;
    both.erased += hi.erased;
    both.m_stalled += hi.m_stalled;
    both.v_stalled += hi.v_stalled;
    both.update_sq += hi.update_sq;
    both.weight_sq += hi.weight_sq;
    expect_telemetry_eq(both, all, kSumRel);
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, AdamWSpec, ::testing::ValuesIn(kSpecs),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name;
                           for (char c : info.param) name += std::isalnum(c) ? c : '_';
                           return name;
                         });

// ---- SR is unbiased where RN erases -----------------------------------------

TEST(AdamWNumerics, SrUpdateIsUnbiasedWhereRnErasesIt) {
  // Step 1 from m = v = 0 with a constant gradient: mhat = g, vhat = g^2, so
  // update = -lr * g / (|g| + eps), the same for every element, and 1e-3 is
  // far below half a bf16 ulp of 1.5 (2^-8).
  const size_t n = 1 << 18;
  const float w0 = 1.5f, lr = 1e-3f;
  AdamWHyper h = hyper(1, lr);
  h.weight_decay = 0.0f;
  h.grad_scale = 1.0f;
  const std::vector<ParamSegment> segs = {{0, n, false}};
  const float g = 1e-2f;
  const double update = -double(lr) * double(g) / (double(g) + double(h.eps));
  AdamWTelemetry tel_sr, tel_rn;
  double mean_change = 0;
  for (const char* spec : {"bf16-sr", "bf16"}) {
    const AdamWRule rule = rule_of(spec);
    State s(rule, n);
    for (size_t i = 0; i < n; ++i) {
      store(s.w, DType::kBF16, i, w0);
      store(s.g, DType::kBF16, i, g);
      store(s.m, DType::kBF16, i, 0.0f);
      store(s.v, DType::kBF16, i, 0.0f);
    }
    const bool sr = rule.weight_sr;
    cpu::adamw_step(rule, s.at(0), segs.data(), 1, 0, n, h, sr ? &tel_sr : &tel_rn);
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += double(s.weight(i)) - w0;
    if (sr) {
      mean_change = sum / double(n);
    } else {
      EXPECT_EQ(sum, 0.0) << "RN must leave every weight at " << w0;
    }
  }
  // Each SR result is w0 - 2^-7 with probability p = |update| / 2^-7, else w0:
  // the mean's standard deviation is 2^-7 sqrt(p (1 - p) / n). Allow 5 sigma.
  const double ulp = 0x1p-7, p = std::fabs(update) / ulp;
  const double sigma = ulp * std::sqrt(p * (1 - p) / double(n));
  EXPECT_NEAR(mean_change, update, 5 * sigma) << "sigma " << sigma;
  EXPECT_LT(5 * sigma, 0.03 * std::fabs(update));  // the test can tell a 3% bias apart
  // Telemetry counts the updates RN erases, whatever the strategy.
  EXPECT_EQ(tel_rn.erased, n);
  EXPECT_EQ(tel_sr.erased, n);
  EXPECT_EQ(tel_rn.nonzero, n);
  EXPECT_NEAR(tel_sr.update_sq, double(n) * update * update, kSumRel * double(n) * update * update);
}

TEST(AdamWNumerics, BF16MomentsStallUnderRn) {
  // v = 1e-4 in bf16 with beta2 = 0.999 and g^2 = 1.1e-4: the fp32 EMA moves by
  // 1e-8 (0.01%), below half a bf16 ulp, so RN stores the old v: a stall.
  const size_t n = 4096;
  AdamWHyper h = hyper(100);
  h.beta2 = 0.999f;
  h.grad_scale = 1.0f;
  const std::vector<ParamSegment> segs = {{0, n, true}};
  for (const char* spec : {"bf16", "bf16:vround=sr"}) {
    const AdamWRule rule = rule_of(spec);
    State s(rule, n);
    for (size_t i = 0; i < n; ++i) {
      store(s.w, DType::kBF16, i, 0.5f);
      store(s.g, DType::kBF16, i, std::sqrt(1.1e-4f));
      store(s.m, DType::kBF16, i, 0.0f);
      store(s.v, DType::kBF16, i, 1e-4f);
    }
    AdamWTelemetry tel;
    cpu::adamw_step(rule, s.at(0), segs.data(), 1, 0, n, h, &tel);
    if (rule.v_sr) {
      EXPECT_LT(tel.v_stalled, n * 99 / 100);  // SR moves some of them
      EXPECT_GT(tel.v_stalled, n / 2);         // ...with small probability each
    } else {
      EXPECT_EQ(tel.v_stalled, n);
    }
    EXPECT_EQ(tel.m_stalled, 0u);  // m moves from 0 to (1 - beta1) g: not stalled
  }
}

// ---- Kahan ------------------------------------------------------------------

TEST(AdamWNumerics, KahanTracksTheExactSumRnLoses) {
  // 1000 steps of a constant gradient: update = -lr * g / (|g| + eps) at every
  // step (f32 m, v keep mhat = g and vhat = g^2 to fp32 rounding), 1e-4 each,
  // below half a bf16 ulp of weights near 1 (2^-9): RN never moves.
  const size_t n = 64, steps = 1000;
  const float lr = 1e-4f;
  const std::vector<ParamSegment> segs = {{0, n, false}};
  State kahan(rule_of("bf16-kahan:m=f32,v=f32"), n), rn(rule_of("bf16:m=f32,v=f32"), n);
  std::vector<double> exact(n), w0(n);
  for (State* s : {&kahan, &rn}) {
    for (size_t i = 0; i < n; ++i) {
      w0[i] = 1.25 + double(i) / 128.0;  // w0 +- 0.1 stays in [1, 2): bf16 ulp 2^-7
      store(s->w, DType::kBF16, i, float(w0[i]));
      store(s->g, DType::kBF16, i, (i % 2 ? 1.0f : -1.0f) * 1e-2f);
      store(s->m, DType::kF32, i, 0.0f);
      store(s->v, DType::kF32, i, 0.0f);
      if (!s->kahan.empty()) store(s->kahan, DType::kBF16, i, 0.0f);
    }
  }
  // The exact sum, in double, of the same AdamW trajectory.
  std::vector<double> m(n, 0.0), v(n, 0.0);
  for (uint64_t t = 1; t <= steps; ++t) {
    AdamWHyper h = hyper(t, lr);
    h.grad_scale = 1.0f;
    for (State* s : {&kahan, &rn})
      cpu::adamw_step(s->rule, s->at(0), segs.data(), 1, 0, n, h, nullptr);
    for (size_t i = 0; i < n; ++i) {
      const double g = rn.grad(i);
      m[i] = h.beta1 * m[i] + (1 - double(h.beta1)) * g;
      v[i] = h.beta2 * v[i] + (1 - double(h.beta2)) * g * g;
      exact[i] += -double(lr) * (m[i] / h.bias_correction1) /
                  (std::sqrt(v[i] / h.bias_correction2) + h.eps);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const double target = w0[i] + exact[i];
    const double kahan_err = std::fabs(kahan.weight(i) - target);
    const double rn_err = std::fabs(rn.weight(i) - target);
    EXPECT_NEAR(rn_err, 0.1, 1e-3) << i;  // RN stayed at w0, 1000 * 1e-4 away
    // Kahan keeps the weight within a bf16 ulp (2^-7 here) of the exact sum.
    EXPECT_LE(kahan_err, 0x1p-7) << i;
    EXPECT_LT(12 * kahan_err, rn_err) << i;
  }
}

// ---- rem16 --------------------------------------------------------------------

TEST(Rem16, SplitJoinIsExactForEveryLowHalf) {
  // Every 16-bit low half under 1024 high halves: all signs and exponents with
  // smallest and largest 7-bit mantissas, and every high half with exponent
  // field 0, 1, 254 or 255 (subnormals, the top binade, Inf and NaN).
  std::vector<uint32_t> highs;
  for (uint32_t sign = 0; sign < 2; ++sign) {
    for (uint32_t e = 0; e < 256; ++e) {
      if (e <= 1 || e >= 254) {
        for (uint32_t mant = 0; mant < 128; ++mant) highs.push_back(sign << 15 | e << 7 | mant);
      } else {
        highs.push_back(sign << 15 | e << 7);
        highs.push_back(sign << 15 | e << 7 | 127);
      }
    }
  }
  uint64_t failures = 0, ties = 0;
  for (uint32_t high : highs) {
    for (uint32_t low = 0; low < 65536; ++low) {
      const uint32_t u = high << 16 | low;
      const float x = bits_as_float(u);
      const Rem16 s = rem16_split(x);
      const float back = rem16_join(s.w, s.r);
      if (float_bits_is_nan(u)) {
        failures += !std::isnan(back) || !std::isnan(bf16_to_float(s.w));
        continue;
      }
      failures += float_as_bits(back) != u;
      // w is RN(x), except at exact ties where it is the other nearest neighbour.
      const bf16 rn = float_to_bf16_rn(x);
      if (low == 0x8000u) {
        ++ties;
        failures += s.w.bits != rn.bits && s.w.bits != uint16_t(rn.bits + 1) &&
                    s.w.bits != uint16_t(rn.bits - 1);
      } else {
        failures += s.w.bits != rn.bits;
      }
    }
  }
  EXPECT_EQ(failures, 0u);
  EXPECT_EQ(ties, highs.size() - 2 * 128);  // exponent 255 with low half 0x8000 is NaN
}

TEST(Rem16, EdgeCases) {
  // Largest finite float: exact master, forward weight +Inf (as RN gives).
  const float big = bits_as_float(0x7f7fffffu);
  Rem16 s = rem16_split(big);
  EXPECT_EQ(s.w.bits, 0x7f80u);
  EXPECT_EQ(float_as_bits(rem16_join(s.w, s.r)), 0x7f7fffffu);
  // Just below the rounding midpoint of the largest finite bf16: finite weight.
  s = rem16_split(bits_as_float(0x7f7f7fffu));
  EXPECT_EQ(s.w.bits, 0x7f7fu);
  EXPECT_EQ(s.r, 0x7fff);
  // A tie: RN would pick the even 0x3f80 with remainder +0x8000, which int16
  // cannot hold; the split takes the odd neighbour above and remainder -0x8000.
  s = rem16_split(bits_as_float(0x3f808000u));
  EXPECT_EQ(s.w.bits, 0x3f81u);
  EXPECT_EQ(s.r, -32768);
  // Zeros, smallest subnormals and infinities.
  for (uint32_t u :
       {0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x7f800000u, 0xff800000u}) {
    s = rem16_split(bits_as_float(u));
    EXPECT_EQ(float_as_bits(rem16_join(s.w, s.r)), u) << std::hex << u;
  }
  // NaN stays NaN.
  EXPECT_TRUE(std::isnan(rem16_join(rem16_split(std::nanf("")).w, 0)));
}

TEST(Rem16, MasterEqualsMixedBitForBit) {
  const size_t n = 20000;
  State mixed(rule_of("mixed"), n), rem16(rule_of("bf16-rem16"), n);
  std::mt19937_64 rng(51);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  for (size_t i = 0; i < n; ++i) {
    const float master = (i % 3 == 0 ? 1.0f : 0.0f) + normal(rng);
    mixed.set_master(i, master);
    rem16.set_master(i, master);
  }
  const auto segs = segments(n);
  for (uint64_t step = 1; step <= 5; ++step) {
    mixed.randomize_grads(100 + step);
    rem16.g = mixed.g;
    AdamWTelemetry tm, tr;
    cpu::adamw_step(mixed.rule, mixed.at(0), segs.data(), segs.size(), 0, n, hyper(step), &tm);
    cpu::adamw_step(rem16.rule, rem16.at(0), segs.data(), segs.size(), 0, n, hyper(step), &tr);
    size_t ties = 0;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(float_as_bits(rem16.master_at(i)), float_as_bits(mixed.master_at(i)))
          << "step " << step << " element " << i;
      if ((float_as_bits(mixed.master_at(i)) & 0xffffu) == 0x8000u) {
        ++ties;
      } else {
        ASSERT_EQ(rem16.weight(i), mixed.weight(i));
      }
    }
    EXPECT_LT(ties, n / 1000);
    EXPECT_EQ(std::memcmp(&tm, &tr, sizeof tm), 0);  // same updates, same telemetry
    EXPECT_EQ(mixed.m, rem16.m);
    EXPECT_EQ(mixed.v, rem16.v);
  }
}

// ---- helpers and call validation -----------------------------------------------

TEST(AdamWHelpers, HalfUlpMatchesBf16Ulp) {
  for (uint32_t e = 0; e < 255; ++e) {
    for (uint32_t mant : {0u, 1u, 0x400000u, 0x7fffffu}) {
      for (uint32_t sign : {0u, 1u}) {
        const float w = bits_as_float(sign << 31 | e << 23 | mant);
        ASSERT_EQ(adamw_half_bf16_ulp(w), 0.5f * bf16_ulp(w)) << "exponent field " << e;
      }
    }
  }
}

TEST(AdamWHelpers, ErasedMeansRnWouldDropIt) {
  // w = 1.5 (bf16 spacing 2^-7 on both sides): RN keeps w for |u| < 2^-8.
  EXPECT_TRUE(adamw_erased(0x1p-9f, 1.5f));
  EXPECT_TRUE(adamw_erased(-0x1.fp-9f, 1.5f));
  EXPECT_FALSE(adamw_erased(0x1.01p-8f, 1.5f));
  EXPECT_FALSE(adamw_erased(0.0f, 1.5f));  // a zero update is not erased
  for (float u : {0x1p-9f, -0x1.fp-9f}) {
    EXPECT_EQ(bf16_to_float(float_to_bf16_rn(1.5f + u)), 1.5f);
  }
}

TEST(AdamWHelpers, TrafficAndFootprint) {
  EXPECT_EQ(adamw_traffic_bytes(rule_of("bf16-sr")), 14u);  // r: w g m v, w: w m v
  EXPECT_EQ(adamw_traffic_bytes(rule_of("mixed")), 28u);    // r: g master m v, w: w master m v
  EXPECT_EQ(adamw_traffic_bytes(rule_of("fp32")), 28u);
  EXPECT_EQ(adamw_traffic_bytes(rule_of("bf16-kahan")), 18u);
  EXPECT_EQ(adamw_traffic_bytes(rule_of("bf16-rem16")), 26u);
}

TEST(AdamWStep, RejectsMalformedCalls) {
  const AdamWRule rule = rule_of("mixed");
  const size_t n = 64;
  State s(rule, n);
  s.randomize(1);
  const std::vector<ParamSegment> segs = {{0, 32, true}, {32, 32, false}};
  const AdamWHyper h = hyper(1);
  auto call = [&](const AdamWRule& r, const AdamWBuffers& b, const std::vector<ParamSegment>& sg,
                  size_t begin, size_t end, const AdamWHyper& hh) {
    cpu::adamw_step(r, b, sg.data(), sg.size(), begin, end, hh, nullptr);
  };
  auto expect_error = [](auto&& f, const char* needle) {
    try {
      f();
      ADD_FAILURE() << "no exception; expected one mentioning " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  };
  AdamWBuffers no_master = s.at(0);
  no_master.master = nullptr;
  expect_error([&] { call(rule, no_master, segs, 0, n, h); }, "master is null");
  AdamWRule bad = rule;
  bad.kahan = true;
  expect_error([&] { call(bad, s.at(0), segs, 0, n, h); }, "invalid rule");
  expect_error([&] { call(rule, s.at(0), segs, 9, 8, h); }, "begin 9 > end 8");
  expect_error(
      [&] {
        call(rule, s.at(0), {{0, 32, true}, {40, 24, false}}, 0, n, h);
      },
      "segment 1 does not start");
  expect_error([&] { call(rule, s.at(0), {{0, 32, true}}, 0, n, h); }, "segments end before");
  expect_error([&] { call(rule, s.at(0), {{8, 56, true}}, 8, n, h); }, "start at offset 0");
  AdamWHyper late = h;
  late.step = uint64_t(1) << 48;
  expect_error([&] { call(rule, s.at(0), segs, 0, n, late); }, "exceeds 2^48");
  // An empty range is fine and touches nothing.
  State before = s;
  AdamWTelemetry tel;
  tel.n = 99;
  cpu::adamw_step(rule, s.at(0), segs.data(), segs.size(), 5, 5, h, &tel);
  EXPECT_TRUE(s.same_bits(before));
  EXPECT_EQ(tel.n, 0u);
}

}  // namespace
