// Data-parallel training under a real `mpirun -np 2` (docs/distributed.md).
//
// ctest runs this binary as a plain, single-process gtest program. Tests launch
//   timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2
//     -x SRKIT_MPI_WORKER=<scenario> -x SRKIT_TRAIN_MPI_DIR=<dir> <this binary>
// and main() runs the scenario on each rank instead of the tests (as in
// test_comm_mpi.cpp): Trainers on an MpiCommunicator, writing checkpoints and
// logs under <dir> and one RESULT line per rank. The one-rank side of each
// comparison runs here, in the gtest process, on the single communicator. The
// fault tests launch sr-train itself under mpirun, as users do.
//
// Every run is the tiny preset on the built-in synthetic corpus: a whole job
// takes a few seconds on two oversubscribed cores.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "lib/checkpoint/safetensors.h"
#include "lib/comm/communicator.h"
#include "lib/model/param_layout.h"
#include "lib/train/checkpoint_io.h"
#include "lib/train/shard_plan.h"
#include "lib/train/trainer.h"
#include "tests/run_command.h"
#include "tests/test_paths.h"
#include "tests/test_train_support.h"

namespace srkit {
namespace {

namespace fs = std::filesystem;
using testing_train::read_all;

// ---- runs shared by both sides -------------------------------------------------

TrainConfig tiny(const fs::path& out, const std::string& strategy, uint64_t steps) {
  TrainConfig c = testing_train::tiny_config(out, strategy, steps);
  c.ckpt_dir = (out / "ckpt").string();
  return c;
}

// An odd number of 64-element groups (the tiny preset with 33 positions), so
// that ZeRO-1 over 2 ranks has a tail on the last rank.
TrainConfig tiny_with_tail(const fs::path& out, const std::string& strategy, uint64_t steps) {
  TrainConfig c = tiny(out, strategy, steps);
  c.max_seq_len = 33;
  return c;
}

const char* const kStrategies[] = {"fp32", "mixed", "bf16", "bf16-sr", "bf16-kahan", "bf16-rem16"};

std::string final_checkpoint(const fs::path& out, uint64_t step) {
  return checkpoint_path((out / "ckpt").string(), step);
}

// ---- the MPI side: scenarios on every rank --------------------------------------

fs::path worker_dir() {
  const char* d = std::getenv("SRKIT_TRAIN_MPI_DIR");
  if (!d) throw std::runtime_error("SRKIT_TRAIN_MPI_DIR is not set");
  return d;
}

void print_result(const char* what, const Communicator& comm, const RunSummary& r) {
  std::printf("RESULT run=%s rank=%d checksum=%016" PRIx64 " max_ulps=%" PRIu64 "\n", what,
              comm.rank(), r.weights_checksum, r.replica_max_ulps);
  std::fflush(stdout);
}

// bf16-sr with shared and with per-rank SR seeds, 8 steps, replicas checked
// every 4 (per-rank mode logs the divergence instead of failing).
void scenario_replicas(Communicator& comm, const fs::path& dir) {
  TrainConfig shared = tiny(dir / "shared", "bf16-sr", 8);
  shared.replica_check = 4;
  print_result("shared", comm, Trainer(shared, comm).run());
  TrainConfig per_rank = tiny(dir / "per_rank", "bf16-sr", 8);
  per_rank.replica_check = 4;
  per_rank.sr_seed = "per-rank";
  print_result("per-rank", comm, Trainer(per_rank, comm).run());
}

// World 2 with accumulation 1, 20 steps, a checkpoint after every step.
void scenario_accum(Communicator& comm, const fs::path& dir) {
  for (const char* s : {"fp32", "bf16-sr"}) {
    TrainConfig c = tiny(dir / (std::string("w2_") + s), s, 20);
    c.ckpt_interval = 1;
    Trainer(c, comm).run();
  }
}

void scenario_zero(Communicator& comm, const fs::path& dir) {
  for (const char* s : kStrategies) {
    Trainer(tiny_with_tail(dir / (std::string("plain_") + s), s, 6), comm).run();
    TrainConfig z = tiny_with_tail(dir / (std::string("zero_") + s), s, 6);
    z.zero = 1;
    Trainer(z, comm).run();
  }
}

// Cross-world-size resume, first 2-rank leg: 6 steps under ZeRO-1 with a
// checkpoint after step 3 (the start of the 2 -> 1 -> 2 chain) and step 6 (the
// reference it must reach).
void scenario_resume_first(Communicator& comm, const fs::path& dir) {
  TrainConfig a = tiny(dir / "a", "bf16-sr", 6);
  a.zero = 1;
  a.ckpt_interval = 3;
  Trainer(a, comm).run();
}

// Second 2-rank leg: finish the 2 -> 1 -> 2 chain from the 1-rank checkpoint b
// (plain data parallel this time), and pass the 1-rank checkpoint c through 2
// ranks (ZeRO-1: load, write d) for the 1 -> 2 -> 1 chain.
void scenario_resume_second(Communicator& comm, const fs::path& dir) {
  TrainConfig finish = tiny(dir / "chain2", "bf16-sr", 6);
  finish.resume = final_checkpoint(dir / "b", 3);
  finish.resume_overrides = {"steps"};  // b passed the state on with a 3-step schedule
  Trainer(finish, comm).run();
  TrainConfig pass = tiny(dir / "d", "bf16-sr", 3);
  pass.zero = 1;
  pass.resume = final_checkpoint(dir / "c", 3);
  pass.resume_overrides = {"steps"};  // only passes the state on
  Trainer(pass, comm).run();
}

// Each rank resumes a different checkpoint of the same step (written by runs
// that differ only in the learning rate): the start-up checks pass, the first
// replica check must stop both ranks.
void scenario_diverged_resume(Communicator& comm, const fs::path& dir) {
  TrainConfig c = tiny(dir / "run", "bf16-sr", 4);
  c.replica_check = 1;
  c.resume = final_checkpoint(dir / (comm.rank() == 0 ? "x" : "y"), 2);
  // The replica check, not the config check, must catch it: x and y ran on one
  // rank with their own learning rates and schedule.
  c.resume_overrides = {"steps", "lr", "batch"};
  Trainer(c, comm).run();
}

int run_worker(const std::string& scenario) {
  std::unique_ptr<Communicator> comm;
  try {
    comm = make_communicator("mpi", 30);
    const fs::path dir = worker_dir();
    if (scenario == "replicas") {
      scenario_replicas(*comm, dir);
    } else if (scenario == "accum") {
      scenario_accum(*comm, dir);
    } else if (scenario == "zero") {
      scenario_zero(*comm, dir);
    } else if (scenario == "resume_first") {
      scenario_resume_first(*comm, dir);
    } else if (scenario == "resume_second") {
      scenario_resume_second(*comm, dir);
    } else if (scenario == "diverged_resume") {
      scenario_diverged_resume(*comm, dir);
    } else {
      std::fprintf(stderr, "unknown SRKIT_MPI_WORKER scenario '%s'\n", scenario.c_str());
      return 4;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] worker %s: %s\n", comm ? comm->rank() : -1, scenario.c_str(),
                 e.what());
    std::fflush(stderr);
    std::_Exit(3);  // without MPI_Finalize: mpirun then ends the other rank at once
  }
  std::printf("[rank %d] OK %s\n", comm->rank(), scenario.c_str());
  return 0;
}

// ---- the gtest side --------------------------------------------------------------

struct JobResult {
  int exit_code = -1;  // of `timeout ... mpirun ...`; 124: the safety timeout fired
  std::string output;  // stdout and stderr of all ranks
};

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

std::string self_path() {
  char path[4096];
  const ssize_t len = readlink("/proc/self/exe", path, sizeof path - 1);
  if (len <= 0) return "";
  path[len] = '\0';
  return path;
}

JobResult run_command(const std::string& cmd) {
  const auto r = srkit::testing_process::run_command(cmd);
  return {r.code, r.output};
}

// The safety timeout only keeps a broken build from hanging ctest; every job
// here ends within seconds.
const std::string kMpirun = "timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 ";

JobResult run_scenario(const std::string& scenario, const fs::path& dir) {
  return run_command(kMpirun + "-x SRKIT_MPI_WORKER=" + scenario + " -x SRKIT_TRAIN_MPI_DIR='" +
                     dir.string() + "' '" + self_path() + "'");
}

#define SKIP_WITHOUT_MPIRUN() \
  if (!have_mpirun()) GTEST_SKIP() << "mpirun is not on PATH (install openmpi-bin)"

#define ASSERT_JOB_OK(job, scenario)                                                        \
  ASSERT_EQ((job).exit_code, 0) << (job).output;                                            \
  ASSERT_NE((job).output.find("[rank 0] OK " scenario), std::string::npos) << (job).output; \
  ASSERT_NE((job).output.find("[rank 1] OK " scenario), std::string::npos) << (job).output

fs::path fresh_dir(const std::string& name) {
  return srkit::testing_paths::fresh_dir("train_mpi", name);
}

// Names of the tensors whose bytes differ between two checkpoints.
std::vector<std::string> differing_tensors(const std::string& a, const std::string& b) {
  const auto ta = read_all(a), tb = read_all(b);
  std::vector<std::string> out;
  for (const auto& [name, bytes] : ta) {
    if (!tb.count(name) || tb.at(name) != bytes) out.push_back(name);
  }
  if (ta.size() != tb.size()) out.push_back("(tensor count)");
  return out;
}

std::vector<nlohmann::json> log_records(const fs::path& log, const std::string& type) {
  std::ifstream f(log);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.at("type") == type) out.push_back(std::move(j));
  }
  return out;
}

std::vector<double> losses(const fs::path& log) {
  std::vector<double> out;
  for (const auto& j : log_records(log, "step")) out.push_back(j.at("loss").get<double>());
  return out;
}

// RESULT lines of one run: rank -> (checksum, max_ulps).
std::map<int, std::pair<std::string, uint64_t>> results(const std::string& output,
                                                        const std::string& run) {
  const std::regex line("RESULT run=" + run +
                        " rank=(\\d+) checksum=([0-9a-f]{16}) max_ulps=(\\d+)");
  std::map<int, std::pair<std::string, uint64_t>> out;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    out[std::stoi((*it)[1])] = {(*it)[2], std::stoull((*it)[3])};
  }
  return out;
}

TEST(TrainMpi, SharedSrBitsKeepReplicasIdenticalPerRankBitsDrift) {
  SKIP_WITHOUT_MPIRUN();
  const fs::path dir = fresh_dir("replicas");
  const JobResult job = run_scenario("replicas", dir);
  ASSERT_JOB_OK(job, "replicas");

  // Shared: each rank's own checksum of its final weights, and the trainer's
  // replica checks at steps 4 and 8 (which would have thrown on a mismatch).
  const auto shared = results(job.output, "shared");
  ASSERT_EQ(shared.size(), 2u) << job.output;
  EXPECT_EQ(shared.at(0).first, shared.at(1).first) << "shared SR bits: replicas differ";
  const auto shared_checks = log_records(dir / "shared" / "bf16-sr.jsonl", "replica_check");
  ASSERT_EQ(shared_checks.size(), 2u);
  for (const auto& j : shared_checks) EXPECT_TRUE(j.at("identical").get<bool>()) << j.dump();

  // Per-rank: the replicas drift apart, and the audit measures by how much.
  const auto per_rank = results(job.output, "per-rank");
  ASSERT_EQ(per_rank.size(), 2u) << job.output;
  EXPECT_NE(per_rank.at(0).first, per_rank.at(1).first);
  const auto checks = log_records(dir / "per_rank" / "bf16-sr.jsonl", "replica_check");
  ASSERT_EQ(checks.size(), 2u);
  const size_t num_weights = ParamLayout(tiny(dir, "bf16-sr", 1).model_config()).total_size();
  for (const auto& j : checks) {
    EXPECT_FALSE(j.at("identical").get<bool>()) << j.dump();
    EXPECT_EQ(j.at("rank"), 1);
    // After 4 steps a large share of the weights differ (about 2/3 when measured):
    // every SR-rounded update on rank 1 flips its own coins.
    EXPECT_GT(j.at("differing").get<double>(), 0.25 * double(num_weights)) << j.dump();
    EXPECT_GT(j.at("max_ulps").get<uint64_t>(), 1u) << j.dump();
    std::printf("per-rank SR seeds, step %d: %llu of %zu weights differ, max %llu ulps (in %s)\n",
                j.at("step").get<int>(), j.at("differing").get<unsigned long long>(), num_weights,
                j.at("max_ulps").get<unsigned long long>(),
                j.at("tensor").get<std::string>().c_str());
  }
  EXPECT_EQ(per_rank.at(0).second, std::max(checks[0].at("max_ulps").get<uint64_t>(),
                                            checks[1].at("max_ulps").get<uint64_t>()));
}

TEST(TrainMpi, ReplicasThatDifferUnderSharedSeedsStopTheRun) {
  SKIP_WITHOUT_MPIRUN();
  const fs::path dir = fresh_dir("diverged");
  for (const char* name : {"x", "y"}) {
    TrainConfig c = tiny(dir / name, "bf16-sr", 2);
    c.lr = name[0] == 'x' ? 3e-3f : 1e-3f;
    Trainer(c).run();
  }
  const JobResult job = run_scenario("diverged_resume", dir);
  ASSERT_NE(job.exit_code, 124) << "job hung:\n" << job.output;
  EXPECT_NE(job.exit_code, 0) << job.output;
  const std::regex error(
      "worker diverged_resume: replicas differ after step 3: rank 1 differs from rank 0 in "
      "\\d+ of \\d+ weights, max \\d+ ulps \\(in [a-z_.0-9]+\\); with --sr-seed shared they "
      "must stay bit-identical");
  EXPECT_TRUE(std::regex_search(job.output, error)) << job.output;
  const auto checks = log_records(dir / "run" / "bf16-sr.jsonl", "replica_check");
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_FALSE(checks[0].at("identical").get<bool>());
  EXPECT_GT(checks[0].at("differing").get<uint64_t>(), 0u);
}

// World 1 with accumulation 2 and world 2 with accumulation 1 read the same
// samples each step (global micro-batch k * W + r) and both scale each
// micro-batch's loss by 1/2, so step 1's loss is bit-identical. The gradient
// sums then differ in order and rounding:
//   - 1 rank: the second micro-batch's backward adds its contributions into the
//     gradient buffer one kernel at a time, rounding to the gradient dtype after
//     each add;
//   - 2 ranks: each rank's complete gradient (rounded to the gradient dtype) is
//     summed across ranks in fp32 and rounded once.
// bf16-sr: the bf16 roundings differ, so many tensors differ after step 1.
// fp32: no rounding to a narrower type, and most tensors get one contribution
// per micro-batch (one GEMM with beta = 1 or one reduction), so g0 + g1 is
// the same sum either way and they are bit-identical after step 1. Not wte: the
// tied LM head's GEMM and the token embedding's scatter both add into it, so one
// rank computes ((M0 + E0) + M1) + E1 and two ranks (M0 + E0) + (M1 + E1). That
// difference then spreads, and after 20 steps no run is bit-identical to the
// other; the loss curves agree closely.
TEST(TrainMpi, WorldTwoAccumOneTracksWorldOneAccumTwo) {
  SKIP_WITHOUT_MPIRUN();
  const fs::path dir = fresh_dir("accum");
  const JobResult job = run_scenario("accum", dir);
  ASSERT_JOB_OK(job, "accum");
  struct Expect {
    const char* strategy;
    double loss_tolerance;  // max |loss difference| over 20 steps, nats
  };
  // Measured: fp32 losses identical to the last digit, bf16-sr within 1e-3.
  for (const Expect& e : {Expect{"fp32", 1e-4}, Expect{"bf16-sr", 1e-2}}) {
    const std::string s = e.strategy;
    TrainConfig one = tiny(dir / ("w1_" + s), s, 20);
    one.grad_accum = 2;
    one.ckpt_interval = 1;
    Trainer(one).run();
    const fs::path w1 = dir / ("w1_" + s), w2 = dir / ("w2_" + s);
    const std::vector<double> a = losses(w1 / (s + ".jsonl")), b = losses(w2 / (s + ".jsonl"));
    ASSERT_EQ(a.size(), 20u);
    ASSERT_EQ(b.size(), 20u);
    EXPECT_EQ(a[0], b[0]) << s << ": same weights and samples at step 1";
    double worst = 0.0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    EXPECT_LE(worst, e.loss_tolerance) << s;
    std::printf(
        "%s: world 1 accum 2 vs world 2 accum 1, max |loss difference| over 20 steps %.3g\n",
        s.c_str(), worst);

    const std::vector<std::string> step1 =
        differing_tensors(final_checkpoint(w1, 1), final_checkpoint(w2, 1));
    std::vector<std::string> weights1;  // weight tensors only
    for (const std::string& n : step1) {
      if (n.rfind("optimizer.", 0) != 0) weights1.push_back(n);
    }
    if (s == "fp32") {
      EXPECT_EQ(weights1, std::vector<std::string>{"wte"})
          << "fp32 after step 1: only the tied embedding's summation order differs";
    } else {
      EXPECT_GT(weights1.size(), 3u) << "bf16 gradients round differently on the two paths";
    }
    EXPECT_FALSE(differing_tensors(final_checkpoint(w1, 20), final_checkpoint(w2, 20)).empty())
        << s << ": after 20 steps the runs are not bit-identical";
  }
}

TEST(TrainMpi, ZeroOneGivesTheBitsOfPlainDataParallel) {
  SKIP_WITHOUT_MPIRUN();
  const fs::path dir = fresh_dir("zero");
  // The case this covers: shards of unequal length (the last rank takes the tail).
  const ShardPlan plan(ParamLayout(tiny_with_tail(dir, "fp32", 1).model_config()).total_size(), 2);
  ASSERT_EQ(plan.tail(), 64u);
  const JobResult job = run_scenario("zero", dir);
  ASSERT_JOB_OK(job, "zero");
  for (const char* s : kStrategies) {
    const std::string name = s;
    // Weights and the whole optimizer state (gathered from the shards).
    EXPECT_EQ(differing_tensors(final_checkpoint(dir / ("plain_" + name), 6),
                                final_checkpoint(dir / ("zero_" + name), 6)),
              std::vector<std::string>{})
        << name;
    // The per-group telemetry gathered from the shards: the same counts (so the
    // same erased fractions); the sums of squares, fp32 within tiles that a
    // shard boundary cuts differently (kernels/cpu/adamw.h), to ~1e-6.
    const auto plain = log_records(dir / ("plain_" + name) / (name + ".jsonl"), "step");
    const auto zero = log_records(dir / ("zero_" + name) / (name + ".jsonl"), "step");
    ASSERT_EQ(plain.size(), zero.size()) << name;
    for (size_t k = 0; k < plain.size(); ++k) {
      ASSERT_EQ(zero[k].at("groups").size(), 5u) << name;
      for (const auto& [group, p] : plain[k].at("groups").items()) {
        const auto& z = zero[k]["groups"].at(group);
        EXPECT_EQ(z.at("erased_frac"), p.at("erased_frac")) << name << " " << group;
        EXPECT_NEAR(z.at("update_weight_ratio").get<double>(),
                    p.at("update_weight_ratio").get<double>(),
                    1e-6 * p.at("update_weight_ratio").get<double>())
            << name << " " << group;
      }
    }
  }
}

// 2 -> 1 -> 2: 2 ranks (ZeRO-1) train steps 1-3 of 6; 1 rank loads that
// checkpoint and writes its own without training; 2 ranks resume it for steps
// 4-6 and must end with the bits of the uninterrupted 2-rank run. 1 -> 2 -> 1
// likewise, with 1 rank (accumulation 2) training and 2 ranks passing the
// checkpoint on. (A leg that only passes a checkpoint on runs with --steps 3:
// it takes no step, so its schedule does not matter.)
TEST(TrainMpi, CheckpointsMoveBetweenWorldSizesBitExactly) {
  SKIP_WITHOUT_MPIRUN();
  const fs::path dir = fresh_dir("resume");
  const JobResult first = run_scenario("resume_first", dir);
  ASSERT_JOB_OK(first, "resume_first");

  auto one_rank = [&](const std::string& name, uint64_t steps, const std::string& resume) {
    TrainConfig c = tiny(dir / name, "bf16-sr", steps);
    c.grad_accum = 2;
    c.ckpt_interval = 3;
    c.resume = resume;
    if (!resume.empty()) c.resume_overrides = {"steps"};  // state passes 3- and 6-step runs
    return Trainer(c).run();
  };
  one_rank("b", 3, final_checkpoint(dir / "a", 3));
  one_rank("c", 6, "");

  const JobResult second = run_scenario("resume_second", dir);
  ASSERT_JOB_OK(second, "resume_second");
  one_rank("chain1", 6, final_checkpoint(dir / "d", 3));

  // The checkpoints passed through the other world size hold the same tensors.
  EXPECT_EQ(differing_tensors(final_checkpoint(dir / "a", 3), final_checkpoint(dir / "b", 3)),
            std::vector<std::string>{});
  EXPECT_EQ(differing_tensors(final_checkpoint(dir / "c", 3), final_checkpoint(dir / "d", 3)),
            std::vector<std::string>{});
  EXPECT_EQ(read_checkpoint_info(final_checkpoint(dir / "a", 3)).world_size, 2);
  EXPECT_EQ(read_checkpoint_info(final_checkpoint(dir / "b", 3)).world_size, 1);
  // And training continues bit for bit.
  EXPECT_EQ(differing_tensors(final_checkpoint(dir / "a", 6), final_checkpoint(dir / "chain2", 6)),
            std::vector<std::string>{});
  EXPECT_EQ(differing_tensors(final_checkpoint(dir / "c", 6), final_checkpoint(dir / "chain1", 6)),
            std::vector<std::string>{});
}

// ---- sr-train under mpirun ----------------------------------------------------------

const std::string kTinyFlags =
    " --model tiny --batch 4 --seq-len 32 --synthetic-bytes 65536 --sample-tokens 0 "
    "--eval-interval 0";

// Rank 1 runs `before_exec` in its shell first (e.g. a delayed signal to itself:
// $$ is the shell, which exec turns into sr-train).
JobResult run_sr_train(const std::string& flags, const std::string& rank1_flags = "",
                       const std::string& rank1_before_exec = "") {
  const std::string bin = std::string(SRKIT_BIN_DIR) + "/sr-train " + kTinyFlags + " " + flags;
  const std::string script = "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then " + rank1_before_exec +
                             " exec " + bin + " " + rank1_flags + "; else exec " + bin + "; fi";
  return run_command(kMpirun + "sh -c '" + script + "'");
}

int count_of(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

using srkit::testing_process::shell_checkpoint_exists, srkit::testing_process::shell_log_has_step;

// Rank 1's `before_exec`: in the background, once `condition` holds, `act` on
// the shell (which exec turns into sr-train).
std::string once(const std::string& condition, const std::string& act) {
  return "(" + srkit::testing_process::shell_wait_until(condition) + "; " + act + " $$) &";
}

void expect_checkpoints_intact(const fs::path& ckpt_dir) {
  ASSERT_TRUE(fs::exists(ckpt_dir));
  for (const auto& e : fs::directory_iterator(ckpt_dir)) {
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
  }
  const std::string last = resolve_checkpoint(ckpt_dir.string());
  EXPECT_NO_THROW(read_all(last)) << last;
}

TEST(SrTrainMpi, RankZeroAloneReportsAndTheLogCountsCommunication) {
  SKIP_WITHOUT_MPIRUN();
  const fs::path dir = fresh_dir("cli");
  const JobResult job = run_sr_train("--steps 4 --zero 1 --replica-check 2 --out " + dir.string());
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_EQ(count_of(job.output, "| strategy |"), 1) << job.output;
  EXPECT_EQ(count_of(job.output, "world 2 (mpi), ZeRO-1, SR seed shared"), 1) << job.output;
  const auto summary = log_records(dir / "bf16-sr.jsonl", "summary");
  ASSERT_EQ(summary.size(), 1u);
  const auto& s = summary[0].at("summary");
  EXPECT_EQ(s.at("world_size"), 2);
  EXPECT_EQ(s.at("comm"), "mpi");
  EXPECT_GT(s.at("comm_seconds").get<double>(), 0.0);
  EXPECT_EQ(s.at("peak_bytes_per_rank").size(), 2u);
  EXPECT_EQ(s.at("replica_checks"), 2);
  EXPECT_TRUE(summary[0].at("phases").contains("communication"));
  for (const auto& j : log_records(dir / "bf16-sr.jsonl", "step")) {
    EXPECT_GT(j.at("comm_ms").get<double>(), 0.0);
    EXPECT_EQ(j.at("tokens").get<int>(), 256 * j.at("step").get<int>());  // 2 x 4 x 32 a step
  }
}

TEST(SrTrainMpi, MismatchedStrategyStopsEveryRankAtStartUp) {
  SKIP_WITHOUT_MPIRUN();
  const fs::path dir = fresh_dir("mismatch");
  const JobResult job = run_sr_train("--steps 4 --out " + dir.string(), "--strategy bf16");
  ASSERT_NE(job.exit_code, 124) << "job hung:\n" << job.output;
  EXPECT_EQ(job.exit_code, 2) << job.output;
  const std::string msg = "srkit: strategy differs between ranks: rank 1 differs from rank 0";
  EXPECT_EQ(count_of(job.output, "sr-train: [rank 0] " + msg), 1) << job.output;
  EXPECT_EQ(count_of(job.output, "sr-train: [rank 1] " + msg), 1) << job.output;
}

TEST(SrTrainMpi, AKilledRankFailsTheJobFastNamingIt) {
  SKIP_WITHOUT_MPIRUN();
  const fs::path dir = fresh_dir("killed");
  const JobResult job =
      run_sr_train("--steps 1000000 --ckpt-interval 10 --comm-timeout 20 --out " + dir.string(), "",
                   once(shell_checkpoint_exists(dir / "ckpt-bf16-sr"), "kill -KILL"));
  ASSERT_NE(job.exit_code, 124) << "job hung:\n" << job.output;
  EXPECT_NE(job.exit_code, 0) << job.output;
  // mpirun sees rank 1 die and ends rank 0 at once (well before --comm-timeout).
  EXPECT_NE(job.output.find("process rank 1 with PID"), std::string::npos) << job.output;
  EXPECT_NE(job.output.find("exited on signal 9 (Killed)"), std::string::npos) << job.output;
  expect_checkpoints_intact(dir / "ckpt-bf16-sr");
}

TEST(SrTrainMpi, AHungRankTimesOutNamingIt) {
  SKIP_WITHOUT_MPIRUN();
  const fs::path dir = fresh_dir("hung");
  const JobResult job =
      run_sr_train("--steps 1000000 --ckpt-interval 10 --comm-timeout 2 --out " + dir.string(), "",
                   once(shell_checkpoint_exists(dir / "ckpt-bf16-sr"), "kill -STOP"));
  ASSERT_NE(job.exit_code, 124) << "the 2 s collective timeout did not end the job:\n"
                                << job.output;
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_TRUE(std::regex_search(
      job.output, std::regex("srkit: [a-z_]+ timed out after 2 s waiting for rank 1")))
      << job.output;
  expect_checkpoints_intact(dir / "ckpt-bf16-sr");
}

TEST(SrTrainMpi, ASignalToOneRankStopsAllAfterTheSameStep) {
  SKIP_WITHOUT_MPIRUN();
  const fs::path dir = fresh_dir("signal");
  // ZeRO-1: the final checkpoint gathers the optimizer shards, a collective that
  // completes only if rank 1 stopped after the same step as rank 0.
  const JobResult job =
      run_sr_train("--steps 1000000 --zero 1 --comm-timeout 20 -q --out " + dir.string(), "",
                   once(shell_log_has_step(dir / "bf16-sr.jsonl"), "kill -TERM"));
  EXPECT_EQ(job.exit_code, 128 + 15) << job.output;  // rank 0 reports the signal rank 1 got
  std::smatch m;
  ASSERT_TRUE(std::regex_search(job.output, m, std::regex("stopped by signal 15 at step (\\d+)")))
      << job.output;
  const uint64_t step = std::stoull(m[1]);
  EXPECT_TRUE(fs::exists(checkpoint_path((dir / "ckpt-bf16-sr").string(), step))) << job.output;
  const auto steps = log_records(dir / "bf16-sr.jsonl", "step");
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.back().at("step").get<uint64_t>(), step);
  const auto summary = log_records(dir / "bf16-sr.jsonl", "summary");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0].at("summary").at("stop_signal"), 15);

  // The stopped job resumes from that checkpoint, and its log continues the
  // stopped one's step records without a gap or a repeat.
  const JobResult resumed =
      run_sr_train("--steps " + std::to_string(step + 2) + " --resume-override steps --zero 1 " +
                   "--comm-timeout 20 -q --resume " + (dir / "ckpt-bf16-sr").string() + " --out " +
                   dir.string());
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto all_steps = log_records(dir / "bf16-sr.jsonl", "step");
  for (size_t i = 0; i < all_steps.size(); ++i) {
    EXPECT_EQ(all_steps[i].at("step").get<uint64_t>(), i + 1);
  }
  EXPECT_EQ(all_steps.size(), step + 2);
}

}  // namespace
}  // namespace srkit

int main(int argc, char** argv) {
  if (const char* scenario = std::getenv("SRKIT_MPI_WORKER")) {
    return srkit::run_worker(scenario);
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
