// The Shadow-FP32 drift probe (lib/train/shadow_probe.h) on known answers: the
// fp32 strategy runs the very same unrounded math, so its drift is exactly 0;
// `mixed` rounds an fp32 master (identical to the shadow) to nearest, so every
// weight is within half a bf16 ulp of its shadow; pure bf16 with RN drifts
// further. Plus the sampling rules and the log cadence.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/backend/backend.h"
#include "lib/model/gpt_config.h"
#include "lib/model/param_layout.h"
#include "lib/train/shadow_probe.h"
#include "lib/train/train_config.h"
#include "lib/train/trainer.h"
#include "lib/util/temp_dir.h"

namespace srkit {
namespace {

TrainConfig tiny(const std::string& out, const std::string& strategy) {
  TrainConfig c;
  c.model = "tiny";
  c.strategy = strategy_from_string(strategy);
  c.batch = 4;
  c.seq_len = 32;
  c.steps = 24;
  c.lr = 3e-3f;
  c.eval_interval = 0;
  c.eval_batches = 1;
  c.final_eval = false;
  c.save_final = false;
  c.synthetic_bytes = 64 << 10;
  c.sample_tokens = 0;
  c.quiet = true;
  c.out_dir = out;
  c.shadow_fp32 = 128;
  c.shadow_every = 8;
  return c;
}

std::vector<nlohmann::json> shadow_lines(const std::string& log) {
  std::ifstream in(log);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.at("type") == "shadow") out.push_back(j);
  }
  return out;
}

std::vector<nlohmann::json> run(const std::string& strategy) {
  TempDir dir("shadow");
  const RunSummary r = Trainer(tiny(dir.path(), strategy)).run();
  return shadow_lines(r.log_file);
}

TEST(ShadowProbe, Fp32StrategyHasZeroDriftAndLinesEveryN) {
  const std::vector<nlohmann::json> lines = run("fp32");
  ASSERT_EQ(lines.size(), 3u);  // steps 8, 16, 24
  for (size_t k = 0; k < lines.size(); ++k) {
    EXPECT_EQ(lines[k].at("step").get<uint64_t>(), 8 * (k + 1));
    EXPECT_EQ(lines[k].at("k").get<int>(), 128);
    EXPECT_EQ(lines[k].at("max_abs_ulps").get<double>(), 0.0) << lines[k];
    EXPECT_EQ(lines[k].at("rel_drift").get<double>(), 0.0) << lines[k];
  }
}

TEST(ShadowProbe, MixedStaysWithinHalfAnUlpAndPureBf16DriftsFurther) {
  const std::vector<nlohmann::json> mixed = run("mixed"), rn = run("bf16");
  ASSERT_EQ(mixed.size(), 3u);
  ASSERT_EQ(rn.size(), 3u);
  for (const nlohmann::json& j : mixed) EXPECT_LE(j.at("max_abs_ulps").get<double>(), 0.5) << j;
  EXPECT_GT(rn.back().at("max_abs_ulps").get<double>(), 1.0);
  EXPECT_GT(rn.back().at("rel_drift").get<double>(), mixed.back().at("rel_drift").get<double>());
}

TEST(ShadowProbe, SamplesCoverEveryTensorDeterministically) {
  const GPTConfig mc = TrainConfig{}.model_config();
  const ParamLayout layout(mc);
  const size_t T = layout.tensors().size();
  auto backend = make_cpu_backend(1);
  const ShadowProbe a(*backend, layout, int(3 * T), 5, 0, layout.total_size());
  const ShadowProbe b(*backend, layout, int(3 * T), 5, 0, layout.total_size());
  const ShadowProbe c(*backend, layout, int(3 * T), 6, 0, layout.total_size());
  EXPECT_EQ(a.indices(), b.indices());
  EXPECT_NE(a.indices(), c.indices());
  std::set<std::string> hit;
  for (size_t i : a.indices()) {
    for (const ParamTensor& t : layout.tensors()) {
      if (i >= t.offset && i < t.offset + t.count) hit.insert(t.name);
    }
  }
  EXPECT_EQ(hit.size(), T) << "every tensor holds a sample";
  // A ZeRO shard: samples stay inside it.
  const size_t lo = layout.total_size() / 3, hi = 2 * layout.total_size() / 3;
  const ShadowProbe shard(*backend, layout, 50, 5, lo, hi);
  for (size_t i : shard.indices()) {
    EXPECT_GE(i, lo);
    EXPECT_LT(i, hi);
  }
}

TEST(ShadowProbe, BadSettingsThrow) {
  const ParamLayout layout(TrainConfig{}.model_config());
  auto backend = make_cpu_backend(1);
  EXPECT_THROW(ShadowProbe(*backend, layout, 0, 1, 0, layout.total_size()), std::invalid_argument);
  EXPECT_THROW(ShadowProbe(*backend, layout, 4, 1, 5, 5), std::invalid_argument);
  TrainConfig c = tiny("/tmp", "bf16");
  c.shadow_every = 0;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c.shadow_every = 1;
  c.shadow_fp32 = -1;
  EXPECT_THROW(c.validate(), std::invalid_argument);
}

}  // namespace
}  // namespace srkit
