// The training loop end to end on the tiny preset and the synthetic corpus:
// loss falls under every strategy, runs are bit-reproducible, resume is
// bit-exact, checkpoints round-trip, and divergence stops the run cleanly. Also
// the single-process side of data parallelism: shard plans, the replica audit's
// checksum and ulp distance, sharded checkpoint loads, and that a one-rank
// communicator (plain or ZeRO-1) changes nothing. Runs over MPI are in
// tests/mpi/test_train_mpi.cpp.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_isa.h"
#include "lib/backend/backend.h"
#include "lib/checkpoint/safetensors.h"
#include "lib/comm/communicator.h"
#include "lib/model/gpt.h"
#include "lib/model/param_layout.h"
#include "lib/precision.h"
#include "lib/train/checkpoint_io.h"
#include "lib/train/data_parallel.h"
#include "lib/train/memory_check.h"
#include "lib/train/replica_check.h"
#include "lib/train/schedule.h"
#include "lib/train/shard_plan.h"
#include "lib/train/trainer.h"
#include "tests/test_paths.h"
#include "tests/test_train_support.h"

namespace srkit {
namespace {

namespace fs = std::filesystem;
using testing_train::read_all;

TrainConfig tiny(const fs::path& out, const std::string& strategy, uint64_t steps) {
  return testing_train::tiny_config(out, strategy, steps);
}

fs::path fresh_dir(const std::string& name) {
  return srkit::testing_paths::fresh_dir("trainer", name);
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
                                           "bf16-rem16", "bf16-sr:g=f32", "mixed:g=f32"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
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

// --recompute layer: the same losses and checkpoint bits as the run without
// it, for every storage kind and with gradient accumulation, in less
// activation memory (exactly what the memory model says).
TEST(Trainer, RecomputationGivesTheSameBitsInLessMemory) {
  for (const char* strategy : {"bf16-sr", "mixed", "fp32"}) {
    SCOPED_TRACE(strategy);
    const fs::path dir = fresh_dir(std::string("recompute_") + strategy);
    TrainConfig plain = tiny(dir / "plain", strategy, 4);
    plain.grad_accum = 2;
    TrainConfig again = plain;
    again.out_dir = (dir / "recomputed").string();
    again.recompute = "layer";
    const RunSummary a = Trainer(plain).run();
    const RunSummary b = Trainer(again).run();
    EXPECT_EQ(a.weights_checksum, b.weights_checksum);
    EXPECT_TRUE(read_all(a.checkpoint) == read_all(b.checkpoint));
    EXPECT_EQ(a.train_loss, b.train_loss);
    EXPECT_EQ(a.val_loss, b.val_loss);
    const size_t act_a = a.memory.peak[int(MemCategory::kActivations)];
    const size_t act_b = b.memory.peak[int(MemCategory::kActivations)];
    EXPECT_LT(act_b, act_a);
    EXPECT_EQ(act_b, run_memory_estimate(again, 1).activations);
  }
}

// The execution model (docs/architecture.md): once the first step has sized
// every buffer, a step allocates nothing and reads the host once (the step
// record with losses, norm and clip), for every strategy and with gradient
// accumulation.
TEST(Trainer, StepsAfterTheFirstAllocateNothingAndReadTheHostOnce) {
  for (const char* strategy : {"bf16-sr", "mixed", "fp32", "bf16-kahan"}) {
    TrainConfig c = tiny(fresh_dir(std::string("exec_") + strategy), strategy, 6);
    c.grad_accum = 2;
    const RunSummary r = Trainer(c).run();
    EXPECT_EQ(r.allocations_after_first_step, 0u) << strategy;
    EXPECT_EQ(r.host_reads_after_first_step, 5u) << strategy;
  }
}

// --log-interval: step records (and the optimizer telemetry in them) only every
// N steps and at the last; the run itself is unchanged.
TEST(Trainer, LogIntervalThinsTheStepRecordsOnly) {
  const fs::path a_dir = fresh_dir("log_every_1"), b_dir = fresh_dir("log_every_3");
  TrainConfig a = tiny(a_dir, "bf16-sr", 7), b = tiny(b_dir, "bf16-sr", 7);
  b.log_interval = 3;
  const RunSummary ra = Trainer(a).run(), rb = Trainer(b).run();
  EXPECT_TRUE(read_all(ra.checkpoint) == read_all(rb.checkpoint));
  std::vector<uint64_t> logged;
  std::ifstream log(rb.log_file);
  for (std::string line; std::getline(log, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["type"] != "step") continue;
    logged.push_back(j["step"].get<uint64_t>());
    EXPECT_GT(j["weight_rms"].get<double>(), 0.0) << "telemetry present on logged steps";
  }
  EXPECT_EQ(logged, (std::vector<uint64_t>{3, 6, 7}));
}

// Per-group telemetry in every step record (five groups, fractions in [0, 1]),
// and what it says about RN against an fp32 master at a small learning rate:
// updates of ~1e-4 on LayerNorm gains of 1 are all below half a bf16 ulp, so
// the layernorm group's erased fraction is 1 on every step under both bf16
// (RN) and mixed; bf16 drops them (its gains stay exactly 1), mixed keeps
// them in the master (which moves off 1 while the bf16 gains, RN of it, stay
// 1). Biases start at 0, so at step 1 nothing of theirs is erased.
TEST(Trainer, StepRecordsCarryTelemetryPerTensorGroup) {
  std::map<std::string, std::map<std::string, std::vector<char>>> tensors;
  for (const char* strategy : {"bf16", "mixed"}) {
    TrainConfig c = tiny(fresh_dir(std::string("groups_") + strategy), strategy, 4);
    c.lr = 1e-4f;
    const RunSummary r = Trainer(c).run();
    tensors[strategy] = read_all(r.checkpoint);
    std::ifstream log(r.log_file);
    int steps = 0;
    for (std::string line; std::getline(log, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j["type"] != "step") continue;
      ++steps;
      const nlohmann::json& g = j.at("groups");
      ASSERT_EQ(g.size(), 5u) << line;
      for (const char* name : {"embeddings", "attention", "mlp", "layernorm", "biases"}) {
        const double e = g.at(name).at("erased_frac"), u = g.at(name).at("update_weight_ratio");
        EXPECT_GE(e, 0.0) << strategy << " " << name;
        EXPECT_LE(e, 1.0) << strategy << " " << name;
        EXPECT_TRUE(std::isfinite(u) && u >= 0) << strategy << " " << name;
      }
      EXPECT_EQ(g["layernorm"]["erased_frac"].get<double>(), 1.0) << strategy << " " << line;
      EXPECT_GT(g["attention"]["update_weight_ratio"].get<double>(), 0.0) << strategy;
      if (j["step"] == 1) {
        EXPECT_EQ(g["biases"]["erased_frac"].get<double>(), 0.0) << strategy;
      }
    }
    EXPECT_EQ(steps, 4) << strategy;
  }
  const ParamLayout layout(gpt_preset("tiny"));
  const ParamTensor& gain = layout.get("h.ln_1.weight");
  for (const char* strategy : {"bf16", "mixed"}) {
    const std::vector<char>& w = tensors[strategy].at("h.ln_1.weight");
    ASSERT_EQ(w.size(), gain.count * 2);
    for (size_t i = 0; i < gain.count; ++i) {
      uint16_t bits;
      std::memcpy(&bits, w.data() + 2 * i, 2);
      ASSERT_EQ(bits, 0x3f80) << strategy << ": RN of every gain stays exactly 1 (element " << i
                              << ")";
    }
  }
  const std::vector<char>& master = tensors["mixed"].at("optimizer.master");
  size_t moved = 0;
  for (size_t i = 0; i < gain.count; ++i) {
    float x;
    std::memcpy(&x, master.data() + 4 * (gain.offset + i), 4);
    moved += x != 1.0f;
  }
  EXPECT_GT(moved, gain.count / 2) << "the fp32 master keeps what RN erases";
}

// The amp preset (O1): fp32 storage like fp32, bf16 compute; it trains to
// nearly the same loss, holds the same weights/grads/state, and its compute
// copies of weights and gradients show up as scratch.
TEST(Trainer, AmpKeepsFp32StateAndComputesInBf16) {
  const RunSummary fp32 = Trainer(tiny(fresh_dir("amp_fp32"), "fp32", 10)).run();
  const RunSummary amp = Trainer(tiny(fresh_dir("amp_amp"), "amp", 10)).run();
  EXPECT_NEAR(amp.train_loss, fp32.train_loss, 0.05);
  EXPECT_NE(amp.weights_checksum, fp32.weights_checksum) << "bf16 compute changes the bits";
  for (MemCategory c :
       {MemCategory::kWeights, MemCategory::kMaster, MemCategory::kGrads, MemCategory::kOptState}) {
    EXPECT_EQ(amp.memory.peak[int(c)], fp32.memory.peak[int(c)]) << mem_category_name(c);
  }
  const size_t P = amp.memory.peak[int(MemCategory::kWeights)] / 4;  // fp32 elements
  EXPECT_GE(amp.memory.peak[int(MemCategory::kScratch)], 4 * P) << "bf16 weights + gradients";
  EXPECT_LT(amp.memory.peak[int(MemCategory::kActivations)],
            fp32.memory.peak[int(MemCategory::kActivations)])
      << "bf16 activations";
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

// The AVX-512 Philox draws the AVX2 one's bits (kernels/cpu/cpu_isa.h), so a
// run's every stored bit is the same on either.
TEST(Trainer, CpuIsaDoesNotChangeTheResult) {
  if (!cpu::cpu_has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512: one ISA only";
  const fs::path dir = fresh_dir("isa");
  RunSummary runs[2];
  for (cpu::CpuIsa isa : {cpu::CpuIsa::kAvx2, cpu::CpuIsa::kAvx512}) {
    const cpu::ScopedCpuIsa forced(isa);
    runs[int(isa)] = Trainer(tiny(dir / cpu::cpu_isa_name(isa), "bf16-sr", 4)).run();
  }
  EXPECT_TRUE(read_all(runs[0].checkpoint) == read_all(runs[1].checkpoint));
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
  TrainConfig wider = tiny(dir / "b", "bf16-sr", 2);
  wider.channels = 32;
  wider.resume = r.checkpoint;
  try {
    Trainer(wider).run();
    FAIL() << "expected a shape mismatch error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint is for model"), std::string::npos) << e.what();
  }
  TrainConfig other = tiny(dir / "c", "bf16", 2);
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

// ---- data parallelism on one process -------------------------------------------

TEST(ShardPlan, AlignedShardsWithTheTailOnTheLastRank) {
  const ShardPlan two(1853 * 64, 2);  // an odd number of 64-element groups
  EXPECT_EQ(two.bulk(), 926u * 64);
  EXPECT_EQ(two.tail(), 64u);
  EXPECT_EQ(two.begin(0), 0u);
  EXPECT_EQ(two.end(0), 926u * 64);
  EXPECT_EQ(two.begin(1), 926u * 64);
  EXPECT_EQ(two.end(1), 1853u * 64);

  const ShardPlan three(1000 * 64 + 5, 3);  // a total that is not a multiple of 64
  EXPECT_EQ(three.bulk(), 333u * 64);
  EXPECT_EQ(three.tail(), 64u + 5u);
  size_t covered = 0;
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(three.begin(r) % 64, 0u) << r;  // Philox 8-groups never split
    EXPECT_EQ(three.begin(r), covered) << r;
    covered = three.end(r);
  }
  EXPECT_EQ(covered, three.total());

  const ShardPlan one(4096, 1);
  EXPECT_EQ(one.end(0), 4096u);
  EXPECT_EQ(one.tail(), 0u);
  EXPECT_THROW(ShardPlan(127, 2), std::invalid_argument);
  EXPECT_THROW(ShardPlan(4096, 0), std::invalid_argument);
}

TEST(ReplicaAudit, UlpDistanceCountsRepresentableValues) {
  EXPECT_EQ(ulp_distance_bf16(0x3f80, 0x3f80), 0u);           // 1.0
  EXPECT_EQ(ulp_distance_bf16(0x3f80, 0x3f81), 1u);           // 1.0 and the next bf16
  EXPECT_EQ(ulp_distance_bf16(0x3f7f, 0x3f80), 1u);           // across a binade
  EXPECT_EQ(ulp_distance_bf16(0x0000, 0x8000), 0u);           // +0 and -0
  EXPECT_EQ(ulp_distance_bf16(0x0001, 0x8001), 2u);           // +-smallest subnormal, via zero
  EXPECT_EQ(ulp_distance_bf16(0x3f80, 0xbf80), 2u * 0x3f80);  // 1 and -1
  EXPECT_EQ(ulp_distance_f32(0x3f800000u, 0x3f800003u), 3u);
  EXPECT_EQ(ulp_distance_f32(0xbf800000u, 0xbf800001u), 1u);

  const uint16_t a[] = {0x3f80, 0x4000, 0x0000, 0xc000};
  const uint16_t b[] = {0x3f80, 0x4003, 0x8000, 0xc001};
  const UlpDivergence d = ulp_divergence(DType::kBF16, a, b, 4);
  EXPECT_EQ(d.differing, 3u);  // -0 differs in bits from +0, at distance 0
  EXPECT_EQ(d.max_ulps, 3u);
  EXPECT_EQ(d.max_index, 1u);
}

TEST(TrainConfig, TokensAndStepsCountTheGlobalBatch) {
  TrainConfig c;
  c.batch = 4;
  c.seq_len = 32;
  c.grad_accum = 2;
  c.tokens = 2560;
  EXPECT_EQ(c.tokens_per_step(), 256u);
  EXPECT_EQ(c.tokens_per_step(2), 512u);
  EXPECT_EQ(c.total_steps(), 10u);
  EXPECT_EQ(c.total_steps(2), 5u);
  EXPECT_EQ(c.lr_schedule(2).total_steps, 5u);
  EXPECT_EQ(c.to_json(2).at("world_size"), 2);
}

TEST(TrainConfig, DistributedSettingsAreValidated) {
  const auto expect_rejects = [](auto edit, const std::string& flag) {
    TrainConfig c;  // valid defaults (d4 model), one setting broken
    edit(c);
    try {
      c.validate();
      ADD_FAILURE() << "accepted a bad " << flag;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  expect_rejects([](TrainConfig& c) { c.comm = "gloo"; }, "--comm");
  expect_rejects([](TrainConfig& c) { c.comm = "nccl"; }, "--device cuda");
  expect_rejects([](TrainConfig& c) { c.zero = 2; }, "--zero");
  expect_rejects([](TrainConfig& c) { c.sr_seed = "random"; }, "--sr-seed");
  expect_rejects([](TrainConfig& c) { c.replica_check = -1; }, "--replica-check");
}

TEST(Trainer, OneRankCommunicatorPlainOrZeroChangesNothing) {
  const fs::path dir = fresh_dir("one_rank");
  const RunSummary own = Trainer(tiny(dir / "own", "bf16-sr", 4)).run();
  auto comm = make_single_communicator();
  const RunSummary plain = Trainer(tiny(dir / "plain", "bf16-sr", 4), *comm).run();
  TrainConfig zero = tiny(dir / "zero", "bf16-sr", 4);
  zero.zero = 1;
  const RunSummary sharded = Trainer(zero, *comm).run();
  EXPECT_TRUE(read_all(own.checkpoint) == read_all(plain.checkpoint));
  EXPECT_TRUE(read_all(own.checkpoint) == read_all(sharded.checkpoint));
  EXPECT_EQ(own.world_size, 1);
  EXPECT_EQ(own.comm, "single");
  EXPECT_EQ(sharded.zero, 1);
  EXPECT_GE(own.comm_seconds, 0.0);
  EXPECT_EQ(own.peak_bytes_per_rank, std::vector<size_t>{own.memory.total_peak});
  EXPECT_EQ(own.weights_checksum, sharded.weights_checksum);
}

TEST(Trainer, WeightsChecksumIsTheChecksumOfTheFlatBuffer) {
  const fs::path dir = fresh_dir("checksum");
  const RunSummary r = Trainer(tiny(dir, "bf16", 2)).run();
  // Rebuild the flat buffer from the checkpoint's tensors (padding is zero).
  const ParamLayout layout(TrainConfig(tiny(dir, "bf16", 2)).model_config());
  std::vector<char> flat(layout.total_size() * 2, 0);
  const auto tensors = read_all(r.checkpoint);
  for (const ParamTensor& t : layout.tensors()) {
    const std::vector<char>& bytes = tensors.at(t.name);
    std::copy(bytes.begin(), bytes.end(), flat.begin() + t.offset * 2);
  }
  EXPECT_EQ(r.weights_checksum, checksum_bytes(flat.data(), flat.size()));
}

TEST(Trainer, MemoryLimitIsApplied) {
  const fs::path dir = fresh_dir("mem_limit");
  TrainConfig c = tiny(dir, "bf16-sr", 2);
  c.mem_limit_bytes = 100 << 10;  // the tiny model alone needs ~1 MiB with activations
  EXPECT_THROW(Trainer(c).run(), OutOfMemory);
}

// What a ZeRO-1 rank does on resume: its optimizer covers a shard, and it takes
// that range of the whole-buffer state in the file.
TEST(Checkpoint, AShardedOptimizerLoadsItsRangeOfTheWholeState) {
  const fs::path dir = fresh_dir("shard_load");
  const RunSummary r = Trainer(tiny(dir, "mixed", 3)).run();
  const auto file = read_all(r.checkpoint);
  const TrainConfig c = tiny(dir, "mixed", 3);
  auto backend = make_cpu_backend(1);
  const PrecisionStrategy strategy = strategy_from_string("mixed");
  GPT model(*backend, c.model_config(), strategy.weights());
  const ShardPlan plan(model.layout().total_size(), 2);
  Optimizer shard(model, strategy, c.seed, plan.begin(1), plan.end(1));
  load_checkpoint(r.checkpoint, model, shard);
  const size_t n = plan.end(1) - plan.begin(1);
  int checked = 0;
  for (const Optimizer::StateBuffer& s : shard.state_buffers()) {
    const std::vector<char>& whole = file.at("optimizer." + s.name);
    const size_t es = s.bytes / n;
    std::vector<char> mine(s.bytes);
    backend->copy_to_host(mine.data(), s.data, s.bytes);
    EXPECT_TRUE(std::equal(mine.begin(), mine.end(), whole.begin() + plan.begin(1) * es)) << s.name;
    ++checked;
  }
  EXPECT_EQ(checked, 3);  // master, adam_m, adam_v
  // A shard alone cannot be written: the file must hold the whole state.
  EXPECT_THROW(save_checkpoint((dir / "x.safetensors").string(), model, shard, CheckpointInfo{}),
               std::logic_error);
}

// One rank: every collective is the identity, and a step's record goes through
// the device and comes back in one read.
TEST(DataParallel, OneRankCollectivesAreTheIdentity) {
  TrainConfig c = tiny(fresh_dir("dp_one"), "bf16-sr", 1);
  auto backend = make_cpu_backend(1);
  GPT model(*backend, c.model_config(), DType::kBF16);
  auto comm = make_single_communicator();
  PhaseTimers timers;
  DataParallel dp(*comm, model, 1, /*grad_accum=*/3, &timers);
  EXPECT_EQ(dp.optimizer_begin(), 0u);
  EXPECT_EQ(dp.optimizer_end(), model.layout().total_size());
  const auto all = dp.all_gather({1.5, -2.0, 1e300});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0], (std::vector<double>{1.5, -2.0, 1e300}));
  // Gradients with a sum of squares of 16: 0.5 in 64 elements.
  const size_t n = model.layout().total_size();
  std::vector<bf16> g(n, bf16{0});
  for (size_t i = 0; i < 64; ++i) g[i] = float_to_bf16_rn(0.5f);
  backend->copy_to_device(model.grads(), g.data(), n * sizeof(bf16));
  const double losses[] = {2.0, 3.0, 7.0};
  for (int k = 0; k < 3; ++k) backend->copy_to_device(dp.loss_slot(k), &losses[k], sizeof(double));
  dp.reduce_gradients();
  const BackendCounters before = backend->counters();
  dp.exchange(15, /*max_norm=*/1.0f);
  const DataParallel::StepTotals t = dp.finish_step(/*with_telemetry=*/false);
  EXPECT_EQ(backend->counters().host_reads - before.host_reads, 1u) << "one read per step";
  EXPECT_EQ(backend->counters().allocations, before.allocations) << "nothing allocated per step";
  EXPECT_EQ(t.loss, 2.0 / 3 + 3.0 / 3 + 7.0 / 3);  // each micro-batch's share, in order
  EXPECT_EQ(t.grad_norm, 4.0);
  EXPECT_EQ(t.clip_scale, 0.25f);
  EXPECT_TRUE(t.finite);
  EXPECT_EQ(t.stop_signal, 15);
  EXPECT_TRUE(dp.check_replicas().identical);
  EXPECT_EQ(timers.stats().count("communication"), 0u) << "one rank communicates nothing";
}

// A non-finite loss or gradient makes the clip say "do not step".
TEST(DataParallel, NonFiniteLossStopsTheStep) {
  TrainConfig c = tiny(fresh_dir("dp_nan"), "bf16-sr", 1);
  auto backend = make_cpu_backend(1);
  GPT model(*backend, c.model_config(), DType::kBF16);
  auto comm = make_single_communicator();
  DataParallel dp(*comm, model, 0, 1, nullptr);
  const double nan = std::nan("");
  backend->copy_to_device(dp.loss_slot(0), &nan, sizeof nan);
  dp.exchange(0, 1.0f);
  EXPECT_FALSE(dp.finish_step(false).finite);
}

}  // namespace
}  // namespace srkit
