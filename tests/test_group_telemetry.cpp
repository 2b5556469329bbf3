// Optimizer telemetry per tensor group: the layout's group ranges (which
// tensor goes where, contiguous cover), the CPU step split into group ranges
// against the single pass (the same bits for every strategy, telemetry that
// adds up to the whole buffer's), the Optimizer's slots under a ZeRO shard,
// and the step record's fractions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/adamw.h"
#include "kernels/cpu/adamw.h"
#include "lib/backend/backend.h"
#include "lib/model/gpt.h"
#include "lib/model/param_layout.h"
#include "lib/precision.h"
#include "lib/train/group_telemetry.h"
#include "lib/train/optimizer.h"
#include "tests/adamw_element_reference.h"

namespace srkit {
namespace {

using srkit::testing::expect_telemetry_eq;

const std::vector<std::string> kSpecs = {
    "fp32", "mixed", "bf16", "bf16-sr", "bf16-kahan", "bf16-rem16", "bf16-sr:mround=sr,vround=sr",
};

TEST(ParamGroups, EveryTensorInItsGroupAndTheRangesCoverTheBuffer) {
  const ParamLayout layout(gpt_preset("tiny"));
  const std::map<std::string, std::string> want = {
      {"wte", "embeddings"},
      {"wpe", "embeddings"},
      {"h.ln_1.weight", "layernorm"},
      {"h.ln_1.bias", "biases"},
      {"h.attn.c_attn.weight", "attention"},
      {"h.attn.c_attn.bias", "biases"},
      {"h.attn.c_proj.weight", "attention"},
      {"h.attn.c_proj.bias", "biases"},
      {"h.ln_2.weight", "layernorm"},
      {"h.ln_2.bias", "biases"},
      {"h.mlp.c_fc.weight", "mlp"},
      {"h.mlp.c_fc.bias", "biases"},
      {"h.mlp.c_proj.weight", "mlp"},
      {"h.mlp.c_proj.bias", "biases"},
      {"ln_f.weight", "layernorm"},
      {"ln_f.bias", "biases"},
  };
  ASSERT_EQ(layout.tensors().size(), want.size());
  for (const ParamTensor& t : layout.tensors()) {
    EXPECT_EQ(param_group_name(t.group), want.at(t.name)) << t.name;
  }
  const std::vector<ParamGroupRange> ranges = layout.group_ranges();
  ASSERT_EQ(ranges.size(), 15u) << "wte+wpe merge; the other 14 tensors alternate groups";
  size_t at = 0;
  for (size_t r = 0; r < ranges.size(); ++r) {
    EXPECT_EQ(ranges[r].begin, at) << r;
    EXPECT_LT(ranges[r].begin, ranges[r].end) << r;
    if (r > 0) {
      EXPECT_NE(ranges[r].group, ranges[r - 1].group) << "maximal runs";
    }
    at = ranges[r].end;
  }
  EXPECT_EQ(at, layout.total_size());
  for (const ParamTensor& t : layout.tensors()) {
    bool inside = false;
    for (const ParamGroupRange& r : ranges) {
      inside = inside || (r.group == t.group && r.begin <= t.offset && t.offset + t.count <= r.end);
    }
    EXPECT_TRUE(inside) << t.name;
  }
}

// One strategy's arrays over n elements, with random weights and gradients.
struct Arrays {
  AdamWRule rule;
  std::vector<uint8_t> w, g, master, m, v, kahan;

  Arrays(const AdamWRule& r, size_t n, uint32_t seed) : rule(r) {
    const AdamWArrayBytes b = adamw_array_bytes(r);
    w.resize(n * b.weights), g.resize(n * b.grads), master.resize(n * b.master);
    m.resize(n * b.m), v.resize(n * b.v), kahan.resize(n * b.kahan);
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (size_t i = 0; i < n; ++i) {
      // Every ninth weight is 1 (LayerNorm-gain-like, where small updates are
      // erased); every thirteenth 0 (bias-like).
      const float x = i % 9 == 0 ? 1.0f : i % 13 == 0 ? 0.0f : normal(rng);
      put(w, r.weights, i, x);
      if (r.master == MasterKind::kF32) put(master, DType::kF32, i, get(w, r.weights, i));
    }
  }
  void new_grads(uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1e-3f);
    const size_t n = g.size() / dtype_size(rule.grads);
    for (size_t i = 0; i < n; ++i) put(g, rule.grads, i, i % 17 == 0 ? 0.0f : normal(rng));
  }
  static void put(std::vector<uint8_t>& buf, DType t, size_t i, float x) {
    if (t == DType::kF32) {
      std::memcpy(buf.data() + 4 * i, &x, 4);
    } else {
      const bf16 h = float_to_bf16_rn(x);
      std::memcpy(buf.data() + 2 * i, &h, 2);
    }
  }
  static float get(const std::vector<uint8_t>& buf, DType t, size_t i) {
    if (t == DType::kF32) {
      float x;
      std::memcpy(&x, buf.data() + 4 * i, 4);
      return x;
    }
    bf16 h;
    std::memcpy(&h, buf.data() + 2 * i, 2);
    return bf16_to_float(h);
  }
  // The buffers with element 0 at index `at`.
  AdamWBuffers at(size_t k) {
    const AdamWArrayBytes b = adamw_array_bytes(rule);
    const auto p = [k](std::vector<uint8_t>& x, size_t es) -> void* {
      return x.empty() ? nullptr : x.data() + k * es;
    };
    return {p(w, b.weights), p(g, b.grads), p(master, b.master),
            p(m, b.m),       p(v, b.v),     p(kahan, b.kahan)};
  }
  bool operator==(const Arrays& o) const {
    return w == o.w && master == o.master && m == o.m && v == o.v && kahan == o.kahan;
  }
};

// The CPU step over the tiny layout, once as one pass and once as one pass per
// group range (what Optimizer::step does on logging steps): the same stored
// bits after several steps, and per-range telemetry whose counts add up to the
// single pass's exactly and whose sums agree to fp64 reordering.
TEST(GroupTelemetry, SplitPassesStoreTheSameBitsAndTheirTelemetryAddsUp) {
  const ParamLayout layout(gpt_preset("tiny"));
  const std::vector<ParamSegment> segs = layout.segments();
  const std::vector<ParamGroupRange> ranges = layout.group_ranges();
  const size_t n = layout.total_size();
  AdamWSettings settings;
  for (const std::string& spec : kSpecs) {
    const AdamWRule rule = strategy_from_string(spec).rule;
    Arrays whole(rule, n, 7), split(rule, n, 7);
    for (uint64_t step = 1; step <= 3; ++step) {
      whole.new_grads(uint32_t(100 + step));
      split.new_grads(uint32_t(100 + step));
      const AdamWHyper h = make_adamw_hyper(step, 1e-3f, settings, 1.0f, 42);
      AdamWTelemetry want;
      cpu::adamw_step(rule, whole.at(0), segs.data(), segs.size(), 0, n, h, &want);
      AdamWTelemetry sum{};
      GroupTelemetry groups{};
      for (const ParamGroupRange& r : ranges) {
        AdamWTelemetry part;
        cpu::adamw_step(rule, split.at(r.begin), segs.data(), segs.size(), r.begin, r.end, h,
                        &part);
        EXPECT_EQ(part.n, r.end - r.begin);
        add_telemetry(sum, part);
        add_telemetry(groups[size_t(r.group)], part);
      }
      const std::string what = spec + " step " + std::to_string(step);
      EXPECT_TRUE(whole == split) << what;
      expect_telemetry_eq(sum, want, 1e-9, what.c_str());
      AdamWTelemetry by_group{};
      for (const AdamWTelemetry& t : groups) add_telemetry(by_group, t);
      expect_telemetry_eq(by_group, want, 1e-9, what.c_str());
      EXPECT_GT(want.erased, 0u) << what << ": the unit weights erase updates of ~1e-3";
      for (size_t k = 0; k < kParamGroupCount; ++k) {
        EXPECT_GE(erased_fraction(groups[k]), 0.0);
        EXPECT_LE(erased_fraction(groups[k]), 1.0);
      }
    }
  }
}

TEST(GroupTelemetry, FractionsFromSums) {
  AdamWTelemetry t{};
  EXPECT_EQ(erased_fraction(t), 0.0) << "no nonzero update";
  EXPECT_EQ(update_weight_ratio(t), 0.0) << "all-zero weights";
  t.nonzero = 8, t.erased = 2, t.update_sq = 4e-6, t.weight_sq = 4.0;
  EXPECT_DOUBLE_EQ(erased_fraction(t), 0.25);
  EXPECT_DOUBLE_EQ(update_weight_ratio(t), 1e-3);
  const nlohmann::json j = groups_json(GroupTelemetry{t, {}, {}, {}, {}});
  ASSERT_EQ(j.size(), kParamGroupCount);
  EXPECT_DOUBLE_EQ(j["embeddings"]["erased_frac"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j["embeddings"]["update_weight_ratio"].get<double>(), 1e-3);
  for (const char* g : {"attention", "mlp", "layernorm", "biases"}) {
    EXPECT_EQ(j[g]["erased_frac"].get<double>(), 0.0) << g;
  }
}

// Optimizer::step with telemetry (one pass per group range) against without
// (one pass), on a ZeRO-like shard that starts and ends inside group ranges:
// the same bits, slots outside the shard zero, slot counts the clipped ranges.
TEST(GroupTelemetry, OptimizerSlotsOnAShardAndTheSameBitsAsOnePass) {
  const GPTConfig config = gpt_preset("tiny");
  const ParamLayout layout(config);
  const std::vector<ParamGroupRange> ranges = layout.group_ranges();
  const size_t begin = ranges[4].begin + kParamAlign, end = ranges[10].begin + 2 * kParamAlign;
  ASSERT_LT(begin, ranges[4].end);
  ASSERT_LT(end, ranges[10].end);
  for (const char* spec : {"bf16-sr", "mixed", "bf16-kahan"}) {
    const PrecisionStrategy strategy = strategy_from_string(spec);
    auto backend = make_cpu_backend(0);
    GPT a(*backend, config, strategy.weights()), b(*backend, config, strategy.weights());
    a.init_weights(3);
    b.init_weights(3);
    Optimizer oa(a, strategy, 11, begin, end), ob(b, strategy, 11, begin, end);
    ASSERT_EQ(oa.telemetry_slots(), ranges.size());
    std::vector<AdamWTelemetry> slots(ranges.size());
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1e-2f);
    AdamWSettings settings;
    for (uint64_t step = 1; step <= 2; ++step) {
      std::vector<float> g(layout.total_size());
      for (float& x : g) x = normal(rng);
      for (GPT* model : {&a, &b}) {
        std::vector<uint8_t> bytes(model->weight_bytes());
        for (size_t i = 0; i < g.size(); ++i) Arrays::put(bytes, model->dtype(), i, g[i]);
        backend->copy_to_device(model->grads(), bytes.data(), bytes.size());
      }
      oa.step(step, 1e-3f, settings, nullptr, slots.data());  // the CPU backend's memory is host
      ob.step(step, 1e-3f, settings, nullptr, nullptr);
      uint64_t n = 0;
      for (size_t r = 0; r < ranges.size(); ++r) {
        const size_t lo = std::max(ranges[r].begin, begin), hi = std::min(ranges[r].end, end);
        EXPECT_EQ(slots[r].n, lo < hi ? hi - lo : 0) << spec << " range " << r;
        if (lo >= hi) {
          EXPECT_EQ(slots[r].nonzero, 0u) << spec << " range " << r;
        }
        n += slots[r].n;
      }
      EXPECT_EQ(n, end - begin);
    }
    EXPECT_EQ(a.weights_as_f32(), b.weights_as_f32()) << spec;
    const auto sa = oa.state_buffers(), sb = ob.state_buffers();
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t k = 0; k < sa.size(); ++k) {
      EXPECT_EQ(std::memcmp(sa[k].data, sb[k].data, sa[k].bytes), 0) << spec << " " << sa[k].name;
    }
  }
}

}  // namespace
}  // namespace srkit
