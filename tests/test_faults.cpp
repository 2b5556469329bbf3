// The fault matrix (docs/reliability.md): sr-train killed or starved at the
// worst moments, and a resume after each. Every surviving checkpoint resumes to
// the bits of an uninterrupted run; the log reads as one run afterwards.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "lib/checkpoint/checkpoint_dir.h"
#include "lib/checkpoint/safetensors.h"
#include "lib/train/checkpoint_io.h"
#include "lib/util/atomic_file.h"
#include "tests/run_command.h"
#include "tests/test_paths.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using Result = srkit::testing_process::CommandResult;

Result shell(const std::string& command) { return srkit::testing_process::run_command(command); }

const std::string kBin = std::string(SRKIT_BIN_DIR) + "/sr-train";
const std::string kRun =
    kBin +
    " --model tiny --batch 2 --seq-len 16 --synthetic-bytes 16384 --sample-tokens 0 -q "
    "--eval-interval 0";

fs::path fresh_dir(const std::string& name) {
  return srkit::testing_paths::fresh_dir("faults", name);
}

std::string checksum_of_run(const fs::path& json) {
  std::ifstream in(json);
  return nlohmann::json::parse(in).at("weights_checksum").get<std::string>();
}

// The log's step numbers, requiring every line to be one complete JSON object.
std::vector<uint64_t> logged_steps(const fs::path& log) {
  std::ifstream in(log);
  std::vector<uint64_t> steps;
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    EXPECT_TRUE(j.is_object()) << "not one record: " << line;
    if (j.is_object() && j.value("type", "") == "step") steps.push_back(j.at("step"));
  }
  return steps;
}

void expect_steps_one_to(const std::vector<uint64_t>& steps, uint64_t n) {
  ASSERT_EQ(steps.size(), n);
  for (uint64_t i = 0; i < n; ++i) EXPECT_EQ(steps[i], i + 1);
}

bool wait_for(const fs::path& file, const std::string& needle, double seconds) {
  return srkit::testing_process::wait_for_text(file, needle, seconds);
}

// Starts sr-train in the background (own process), returns its pid.
pid_t spawn(const std::string& args) {
  return srkit::testing_process::spawn_command(kRun + " " + args);
}

using srkit::testing_process::wait_exit;

constexpr int kSteps = 12;

// The uninterrupted run every faulted one must reproduce, bit for bit.
const std::string& reference_checksum() {
  static const std::string checksum = [] {
    const fs::path dir = fresh_dir("reference");
    const Result r = shell(kRun + " --steps " + std::to_string(kSteps) + " --out " + dir.string() +
                           " --json " + (dir / "summary.json").string());
    EXPECT_EQ(r.code, 0) << r.output;
    return checksum_of_run(dir / "summary.json");
  }();
  return checksum;
}

// Resumes the run in dir to kSteps and returns its final weights' checksum.
std::string resume_to_end(const fs::path& dir, const std::string& extra = "") {
  const Result r = shell(kRun + " --steps " + std::to_string(kSteps) + " --resume " +
                         (dir / "ckpt-bf16-sr").string() + " --out " + dir.string() + " --json " +
                         (dir / "resumed.json").string() + " " + extra);
  EXPECT_EQ(r.code, 0) << r.output;
  return r.code == 0 ? checksum_of_run(dir / "resumed.json") : "";
}

}  // namespace

TEST(Faults, SigkillAtRandomMomentsNeverLeavesATornCheckpoint) {
  std::mt19937 rng(20261203);
  std::uniform_int_distribution<int> delay_ms(150, 900);
  for (int attempt = 0; attempt < 4; ++attempt) {
    const fs::path dir = fresh_dir("kill" + std::to_string(attempt));
    const pid_t pid =
        spawn("--steps 100000 --ckpt-interval 1 --out " + dir.string());  // a checkpoint per step
    ASSERT_TRUE(wait_for(dir / "bf16-sr.jsonl", "\"step\":1,", 60));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    kill(pid, SIGKILL);
    EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
    // Every checkpoint at a final name is whole (the reader validates the
    // header and that the tensors cover the file exactly).
    int whole = 0;
    for (const auto& e : fs::directory_iterator(dir / "ckpt-bf16-sr")) {
      const std::string name = e.path().filename().string();
      if (!name.starts_with("ckpt_") || srkit::is_atomic_temporary(name)) continue;
      EXPECT_NO_THROW(srkit::SafetensorsReader reader(e.path().string())) << name;
      ++whole;
    }
    ASSERT_GT(whole, 0);
    // The latest resumes, and the log reads as one run: steps 1..S+2 once each.
    const std::string latest = srkit::latest_checkpoint((dir / "ckpt-bf16-sr").string());
    const uint64_t saved = srkit::read_checkpoint_info(latest).step;
    const uint64_t end = saved + 2;
    const Result r = shell(kRun + " --steps " + std::to_string(end) +
                           " --resume-override steps --ckpt-interval 1 --resume " +
                           (dir / "ckpt-bf16-sr").string() + " --out " + dir.string());
    ASSERT_EQ(r.code, 0) << r.output;
    expect_steps_one_to(logged_steps(dir / "bf16-sr.jsonl"), end);
    EXPECT_TRUE(std::none_of(fs::directory_iterator(dir / "ckpt-bf16-sr"), fs::directory_iterator(),
                             [](const fs::directory_entry& e) {
                               return srkit::is_atomic_temporary(e.path().filename().string());
                             }))
        << "the resumed run removes the killed writer's temporaries";
  }
}

// The schedule depends on --steps, so a bit-exact comparison needs the same
// --steps: kill a run of kSteps mid-way and resume it.
TEST(Faults, SigkillMidRunResumesToTheUninterruptedBits) {
  const std::string want = reference_checksum();
  const fs::path dir = fresh_dir("killmid");
  const pid_t pid =
      spawn("--steps " + std::to_string(kSteps) + " --ckpt-interval 2 --log-interval 1 --out " +
            dir.string() + " --sample-tokens 0");
  // Stop it hard once a checkpoint exists but before the end.
  ASSERT_TRUE(wait_for(dir / "bf16-sr.jsonl", "\"step\":3,", 60));
  kill(pid, SIGKILL);
  const int code = wait_exit(pid);
  if (code == 0) GTEST_SKIP() << "the run finished before the kill landed";
  EXPECT_EQ(resume_to_end(dir, "--ckpt-interval 2"), want);
  expect_steps_one_to(logged_steps(dir / "bf16-sr.jsonl"), kSteps);
}

TEST(Faults, DiskFullDuringACheckpointKeepsThePreviousOne) {
  const std::string want = reference_checksum();
  // Checkpoints at 4 and 8 of the uninterrupted schedule; resume from 4 with
  // the disk "full" (a 64 KiB file-size limit) so the checkpoint at 8 fails.
  const fs::path src = fresh_dir("full_src"), dir = fresh_dir("full");
  ASSERT_EQ(shell(kRun + " --steps " + std::to_string(kSteps) + " --ckpt-interval 4 --out " +
                  src.string())
                .code,
            0);
  fs::create_directories(dir / "ckpt-bf16-sr");
  const fs::path kept = dir / "ckpt-bf16-sr" / "ckpt_00000004.safetensors";
  fs::copy_file(src / "ckpt-bf16-sr" / "ckpt_00000004.safetensors", kept);
  const auto bytes_before = fs::file_size(kept);
  const Result full = shell("ulimit -f 64; exec " + kRun + " --steps " + std::to_string(kSteps) +
                            " --ckpt-interval 4 --resume " + (dir / "ckpt-bf16-sr").string() +
                            " --out " + dir.string());
  EXPECT_EQ(full.code, 2) << full.output;
  EXPECT_THAT(full.output, HasSubstr("ckpt_00000008.safetensors': no space")) << full.output;
  EXPECT_EQ(fs::file_size(kept), bytes_before);
  EXPECT_FALSE(fs::exists(dir / "ckpt-bf16-sr" / "ckpt_00000008.safetensors"));
  // Space again: the run resumes from step 4 to the uninterrupted bits.
  EXPECT_EQ(resume_to_end(dir, "--ckpt-interval 4"), want);
}

TEST(Faults, FullDiskUnderTheLogStopsTheRunAfterACheckpoint) {
  const std::string want = reference_checksum();
  const fs::path dir = fresh_dir("logfull");
  const Result r =
      shell(kRun + " --steps " + std::to_string(kSteps) + " --log /dev/full --out " + dir.string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--log /dev/full: cannot write: no space")) << r.output;
  EXPECT_TRUE(fs::exists(dir / "ckpt-bf16-sr" / "ckpt_00000001.safetensors")) << r.output;
  EXPECT_EQ(resume_to_end(dir), want);
}

TEST(Faults, TwoRunsOnOneFolderTheSecondIsRefused) {
  const fs::path dir = fresh_dir("shared");
  const pid_t first = spawn("--steps 100000 --out " + dir.string());
  ASSERT_TRUE(wait_for(dir / "bf16-sr.jsonl", "\"type\":\"step\"", 60));
  const Result second = shell(kRun + " --steps 5 --lr 3e-3 --out " + dir.string());
  EXPECT_EQ(second.code, 2);
  EXPECT_THAT(second.output, HasSubstr("--out " + dir.string() + " is in use by another run (pid " +
                                       std::to_string(first)));
  kill(first, SIGTERM);
  EXPECT_EQ(wait_exit(first), 128 + SIGTERM);
  // The first run's checkpoint was not touched by the second: it resumes.
  const Result resumed = shell(kRun + " --steps 100000 --resume " +
                               (dir / "ckpt-bf16-sr").string() + " --out " + dir.string() +
                               " --resume-override steps --steps 2000000 2>&1 & pid=$!; sleep 3; "
                               "kill -TERM $pid; wait $pid");
  EXPECT_EQ(resumed.code, 128 + SIGTERM) << resumed.output;
}

TEST(Faults, UnwritableOutputsFailBeforeTraining) {
  const fs::path dir = fresh_dir("unwritable");
  std::ofstream(dir / "plain") << "x";
  const Result r = shell(kRun + " --steps 5 --out " + dir.string() + " --ckpt-dir " +
                         (dir / "plain" / "ckpt").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--ckpt-dir " + (dir / "plain" / "ckpt").string()));
  EXPECT_FALSE(fs::exists(dir / "bf16-sr.jsonl")) << "no step may run first";
  if (::geteuid() != 0) {  // permission bits do not bind root
    fs::create_directory(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    const Result ro = shell(kRun + " --steps 5 --out " + (dir / "ro").string());
    EXPECT_EQ(ro.code, 2);
    EXPECT_THAT(ro.output, HasSubstr("--out " + (dir / "ro").string()));
    fs::permissions(dir / "ro", fs::perms::owner_all);
  }
  const Result json = shell(kRun + " --steps 5 --out " + dir.string() + " --json " +
                            (dir / "missing" / "s.json").string());
  EXPECT_EQ(json.code, 2);
  EXPECT_THAT(json.output, HasSubstr("--json"));
  EXPECT_FALSE(fs::exists(dir / "bf16-sr.jsonl"));
}

TEST(Faults, ASignalDuringTheFinalEvaluationStopsPromptly) {
  const fs::path dir = fresh_dir("evalsignal");
  // One step, then an evaluation of many windows: the signal lands in it.
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string cmd = "exec " + kBin +
                            " --model tiny --batch 2 --seq-len 16 --synthetic-bytes 4000000 -q "
                            "--steps 1 --eval-batches 1000000 --out " +
                            dir.string() + " >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_TRUE(wait_for(dir / "bf16-sr.jsonl", "\"step\":1,", 60));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid), 128 + SIGINT);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 5.0) << "the evaluation went on after the signal";
  EXPECT_TRUE(fs::exists(dir / "ckpt-bf16-sr" / "ckpt_00000001.safetensors"));
  std::ifstream in(dir / "bf16-sr.jsonl");
  std::string line, last;
  while (std::getline(in, line)) last = line;
  const nlohmann::json summary = nlohmann::json::parse(last);
  EXPECT_EQ(summary.at("summary").at("stop_signal"), SIGINT);
}

TEST(Faults, MemoryIsCheckedBeforeItIsSpent) {
  const fs::path dir = fresh_dir("memory");
  const Result r = shell(kRun + " --steps 5 --batch 1000000 --out " + dir.string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("not enough memory for this run on the CPU: needs"));
  EXPECT_THAT(r.output, HasSubstr("is available ("));

  // A text file far larger than memory (sparse: 8 TiB that take no disk) is
  // refused from its size, before a byte is read, by sr-train and sr-prep.
  const fs::path huge = dir / "huge.txt";
  std::ofstream(huge) << "x";
  fs::resize_file(huge, uintmax_t(1) << 43);
  const Result data = shell(kRun + " --steps 5 --data " + huge.string() + " --out " + dir.string());
  EXPECT_EQ(data.code, 2) << data.output;
  EXPECT_THAT(data.output, HasSubstr("not enough memory for the data: needs 17.6 TiB"));
  const Result prep = shell(std::string(SRKIT_BIN_DIR) + "/sr-prep " + huge.string() + " --out " +
                            (dir / "prep").string());
  EXPECT_EQ(prep.code, 2) << prep.output;
  EXPECT_THAT(prep.output, HasSubstr("not enough memory for the inputs: needs 24.0 TiB"));
  fs::remove(huge);
}

TEST(Faults, ResumeWithAnotherConfigIsRefusedUnlessOverridden) {
  const fs::path dir = fresh_dir("config");
  ASSERT_EQ(shell(kRun + " --steps 4 --out " + dir.string()).code, 0);
  const std::string resume =
      " --resume " + (dir / "ckpt-bf16-sr").string() + " --out " + dir.string();
  const Result lr = shell(kRun + " --steps 4 --lr 3e-3 --batch 4" + resume);
  EXPECT_EQ(lr.code, 2);
  EXPECT_THAT(lr.output, HasSubstr("batch (checkpoint 2, this run 4), lr (checkpoint"));
  EXPECT_THAT(lr.output, HasSubstr("--resume-override batch,lr"));
  const Result ok = shell(kRun + " --steps 6 --lr 3e-3 --resume-override steps,lr" + resume);
  EXPECT_EQ(ok.code, 0) << ok.output;
}
