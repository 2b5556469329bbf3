// The training loop end to end on the tiny preset and the synthetic corpus:
// loss falls under every strategy, runs are bit-reproducible, resume is
// bit-exact, checkpoints round-trip, and divergence stops the run cleanly.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lib/checkpoint/safetensors.h"
#include "lib/precision.h"
#include "lib/train/checkpoint_io.h"
#include "lib/train/schedule.h"
#include "lib/train/trainer.h"

namespace srkit {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("srkit_test_trainer_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TrainConfig tiny(const fs::path& out, const std::string& strategy, uint64_t steps) {
  TrainConfig c;
  c.model = "tiny";
  c.strategy = strategy;
  c.batch = 4;
  c.seq_len = 32;
  c.steps = steps;
  c.lr = 3e-3f;
  c.warmup = 2;
  c.eval_interval = 0;
  c.eval_batches = 2;
  c.synthetic_bytes = 64 << 10;
  c.sample_tokens = 0;
  c.quiet = true;
  c.out_dir = out.string();
  return c;
}

// Every tensor of a checkpoint file, as bytes, by name.
std::map<std::string, std::vector<char>> read_all(const std::string& path) {
  SafetensorsReader r(path);
  std::map<std::string, std::vector<char>> out;
  for (const std::string& name : r.names()) {
    std::vector<char> bytes(r.info(name).nbytes);
    r.read(name, bytes.data(), bytes.size());
    out[name] = std::move(bytes);
  }
  return out;
}

TEST(Schedule, WarmupThenCosineToFloor) {
  LrSchedule s;
  s.lr = 1.0f;
  s.min_lr = 0.1f;
  s.warmup_steps = 10;
  s.total_steps = 110;
  EXPECT_FLOAT_EQ(lr_at(s, 1), 0.1f);
  EXPECT_FLOAT_EQ(lr_at(s, 10), 1.0f);
  EXPECT_NEAR(lr_at(s, 60), 0.55f, 1e-6);
  EXPECT_FLOAT_EQ(lr_at(s, 110), 0.1f);
  s.decay = DecayKind::kLinear;
  EXPECT_NEAR(lr_at(s, 35), 1.0f - 0.9f * 0.25f, 1e-6);
  s.decay = DecayKind::kConstant;
  EXPECT_FLOAT_EQ(lr_at(s, 100), 1.0f);
  EXPECT_THROW(decay_from_string("step"), std::invalid_argument);
}

class EveryStrategy : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryStrategy, LossFallsClearlyOnTheSyntheticCorpus) {
  const fs::path dir = fresh_dir("falls_" + GetParam());
  TrainConfig c = tiny(dir, GetParam(), 80);
  c.eval_batches = 4;
  Trainer trainer(c);
  const RunSummary r = trainer.run();
  // Start: ln(256) = 5.55 nats for a byte model at init.
  EXPECT_LT(r.train_loss, 3.6) << GetParam();
  EXPECT_GT(r.val_loss, 0.0);
  EXPECT_LT(r.val_loss, 3.8) << GetParam();
  EXPECT_EQ(r.steps_done, 80u);
  EXPECT_TRUE(fs::exists(r.checkpoint));
  EXPECT_DOUBLE_EQ(r.bytes_per_param, strategy_from_string(GetParam()).bytes_per_param());
}

TEST_P(EveryStrategy, ResumeContinuesBitForBit) {
  const fs::path dir = fresh_dir("resume_" + GetParam());
  TrainConfig full = tiny(dir / "full", GetParam(), 8);
  const RunSummary a = Trainer(full).run();

  TrainConfig first = tiny(dir / "part", GetParam(), 8);
  first.ckpt_interval = 4;
  first.ckpt_dir = (dir / "part_ckpt").string();
  Trainer(first).run();
  TrainConfig second = first;
  second.resume = checkpoint_path(first.ckpt_dir, 4);
  second.ckpt_dir = (dir / "resumed_ckpt").string();
  const RunSummary b = Trainer(second).run();
  ASSERT_EQ(b.steps_done, 8u);
  const auto ta = read_all(a.checkpoint), tb = read_all(b.checkpoint);
  ASSERT_EQ(ta.size(), tb.size());
  for (const auto& [name, bytes] : ta) {
    EXPECT_TRUE(bytes == tb.at(name)) << GetParam() << ": tensor " << name << " differs";
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, EveryStrategy,
                         ::testing::Values("fp32", "mixed", "bf16", "bf16-sr", "bf16-kahan",
                                           "bf16-rem16"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

TEST(Trainer, SameSeedSameBitsDifferentSeedDifferentBits) {
  const fs::path dir = fresh_dir("determinism");
  const RunSummary a = Trainer(tiny(dir / "a", "bf16-sr", 5)).run();
  const RunSummary b = Trainer(tiny(dir / "b", "bf16-sr", 5)).run();
  TrainConfig other = tiny(dir / "c", "bf16-sr", 5);
  other.seed = 7;
  const RunSummary c = Trainer(other).run();
  const auto ta = read_all(a.checkpoint), tb = read_all(b.checkpoint), tc = read_all(c.checkpoint);
  EXPECT_TRUE(ta == tb);
  EXPECT_FALSE(ta == tc);
}

TEST(Trainer, ThreadCountDoesNotChangeTheResult) {
  const fs::path dir = fresh_dir("threads");
  TrainConfig one = tiny(dir / "one", "bf16-sr", 4);
  one.threads = 1;
  TrainConfig two = tiny(dir / "two", "bf16-sr", 4);
  two.threads = 2;
  const RunSummary a = Trainer(one).run();
  const RunSummary b = Trainer(two).run();
  EXPECT_TRUE(read_all(a.checkpoint) == read_all(b.checkpoint));
}

TEST(Trainer, CheckpointRecordsStepSeedStrategyAndConfig) {
  const fs::path dir = fresh_dir("meta");
  TrainConfig c = tiny(dir, "bf16-kahan", 3);
  const RunSummary r = Trainer(c).run();
  const CheckpointInfo info = read_checkpoint_info(r.checkpoint);
  EXPECT_EQ(info.step, 3u);
  EXPECT_EQ(info.data_cursor, 3u);
  EXPECT_EQ(info.seed, c.seed);
  EXPECT_EQ(info.strategy, "bf16-kahan");
  EXPECT_EQ(info.config.at("batch"), 4);
  SafetensorsReader reader(r.checkpoint);
  EXPECT_TRUE(reader.has("wte"));
  EXPECT_TRUE(reader.has("optimizer.kahan_c"));
  EXPECT_EQ(reader.info("wte").dtype, "BF16");
}

TEST(Trainer, ResumeRejectsAnotherModelShapeOrStrategy) {
  const fs::path dir = fresh_dir("mismatch");
  const RunSummary r = Trainer(tiny(dir / "a", "bf16-sr", 2)).run();
  TrainConfig wider = tiny(dir / "b", "bf16-sr", 4);
  wider.channels = 32;
  wider.resume = r.checkpoint;
  try {
    Trainer(wider).run();
    FAIL() << "expected a shape mismatch error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint is for model"), std::string::npos) << e.what();
  }
  TrainConfig other = tiny(dir / "c", "bf16", 4);
  other.resume = r.checkpoint;
  EXPECT_THROW(Trainer(other).run(), std::runtime_error);
}

TEST(Trainer, NonFiniteLossStopsAndLeavesTheLastCheckpointIntact) {
  const fs::path dir = fresh_dir("diverge");
  TrainConfig c = tiny(dir, "fp32", 50);
  c.lr = 1e30f;  // the first update blows the weights up
  c.warmup = 0;
  c.adamw.grad_clip = 0.0f;
  c.ckpt_interval = 1;
  c.ckpt_dir = (dir / "ckpt").string();
  EXPECT_THROW(Trainer(c).run(), TrainingDiverged);
  const std::string last = resolve_checkpoint(c.ckpt_dir);
  EXPECT_NO_THROW(read_all(last));
  EXPECT_GE(read_checkpoint_info(last).step, 1u);
}

TEST(Trainer, GradientAccumulationMatchesOneLargeBatchClosely) {
  const fs::path dir = fresh_dir("accum");
  TrainConfig big = tiny(dir / "big", "fp32", 5);
  big.batch = 8;
  TrainConfig acc = tiny(dir / "acc", "fp32", 5);
  acc.batch = 4;
  acc.grad_accum = 2;
  const RunSummary a = Trainer(big).run();
  const RunSummary b = Trainer(acc).run();
  // Same samples (batch index, sample index) in both; only the summation order differs.
  EXPECT_NEAR(a.train_loss, b.train_loss, 1e-4);
}

}  // namespace
}  // namespace srkit
