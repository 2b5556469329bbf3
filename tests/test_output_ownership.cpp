// A run never overwrites what it does not own (docs/reliability.md): every
// output sr-train writes (the --json summary, the comparison's chart, the JSONL
// log, the checkpoints) is checked before step 1 against the run's other
// outputs and against files another live run holds; a collision is one line
// naming both, exit 2, and the other file is left as it was. A link planted at
// the log's name is not followed onto a file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/run_command.h"
#include "tests/test_paths.h"

namespace {

namespace fs = std::filesystem;
using srkit::testing_process::CommandResult;
using ::testing::HasSubstr;

const std::string kRun = std::string(SRKIT_BIN_DIR) +
                         "/sr-train --model tiny --batch 2 --seq-len 16 --synthetic-bytes 16384 "
                         "--sample-tokens 0 -q --eval-interval 0";

CommandResult train(const std::string& args) {
  return srkit::testing_process::run_command(kRun + " " + args);
}

fs::path fresh_dir(const std::string& name) {
  return srkit::testing_paths::fresh_dir("ownership", name);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int count_lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

// Exit 2 with one line holding every part, before any step ran.
void expect_refused(const CommandResult& r, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
  for (const std::string& part : parts) EXPECT_THAT(r.output, HasSubstr(part));
}

TEST(OutputOwnership, SummaryOnTheRunsOwnLogIsRefusedBeforeStepOne) {
  const fs::path dir = fresh_dir("own_log");
  const std::string log = (dir / "bf16-sr.jsonl").string();
  expect_refused(train("--steps 3 --out " + dir.string() + " --json " + log),
                 {"--json " + log, "is also the run's log", "--out " + log});
  EXPECT_FALSE(fs::exists(dir / "ckpt-bf16-sr" / "ckpt_00000003.safetensors"));
  // Through another spelling of the same file, and with an explicit --log.
  const std::string other = (dir / "." / "x.jsonl").string();
  expect_refused(train("--steps 3 --out " + dir.string() + " --log " + (dir / "x.jsonl").string() +
                       " --json " + other),
                 {"--json " + other, "--log " + (dir / "x.jsonl").string()});
}

TEST(OutputOwnership, SummaryOnTheFinalCheckpointIsRefusedAndResumeStillWorks) {
  const fs::path dir = fresh_dir("final_ckpt");
  ASSERT_EQ(train("--steps 2 --out " + dir.string()).code, 0);
  const fs::path ckpt = dir / "ckpt-bf16-sr" / "ckpt_00000003.safetensors";
  expect_refused(
      train("--steps 3 --resume " + (dir / "ckpt-bf16-sr").string() +
            " --resume-override steps --out " + dir.string() + " --json " + ckpt.string()),
      {"--json " + ckpt.string(), "checkpoint name", "ckpt-bf16-sr"});
  // The folder is as it was: the resume, now with its own summary, goes on from step 2.
  const CommandResult ok = train("--steps 3 --resume " + (dir / "ckpt-bf16-sr").string() +
                                 " --resume-override steps --out " + dir.string() + " --json " +
                                 (dir / "s.json").string());
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_TRUE(fs::exists(ckpt));
}

TEST(OutputOwnership, ComparisonTableOnAStrategysLogIsRefused) {
  const fs::path dir = fresh_dir("compare");
  const std::string log = (dir / "fp32.jsonl").string();
  expect_refused(train("--steps 1 --compare bf16-sr,fp32 --out " + dir.string() + " --json " + log),
                 {"--json " + log, "is also the run's log"});
  EXPECT_FALSE(fs::exists(dir / "bf16-sr.jsonl")) << "refused before the first strategy trains";
}

TEST(OutputOwnership, FilesOfAnotherLiveRunAreRefusedNamingIt) {
  const fs::path dir = fresh_dir("live");
  const fs::path live = dir / "live";
  const pid_t first =
      srkit::testing_process::spawn_command(kRun + " --steps 100000 --out " + live.string());
  ASSERT_TRUE(
      srkit::testing_process::wait_for_text(live / "bf16-sr.jsonl", "\"type\":\"step\"", 60));
  const std::string log = (live / "bf16-sr.jsonl").string();
  // Its log, named as another run's summary: refused, and the log keeps its records.
  expect_refused(train("--steps 1 --out " + (dir / "b").string() + " --json " + log),
                 {"--json " + log, "another live run"});
  EXPECT_THAT(read_text(log), HasSubstr("\"type\":\"step\""));
  // Any file in its folders: refused naming the process that holds them.
  const std::string inside = (live / "summary.json").string();
  expect_refused(train("--steps 1 --out " + (dir / "c").string() + " --json " + inside),
                 {"--json " + inside, "another live run", "pid " + std::to_string(first)});
  const std::string ckpt_log = (live / "ckpt-bf16-sr" / "log.jsonl").string();
  expect_refused(train("--steps 1 --out " + (dir / "d").string() + " --log " + ckpt_log),
                 {"--log " + ckpt_log, "another live run"});
  EXPECT_FALSE(fs::exists(ckpt_log));
  kill(first, SIGTERM);
  EXPECT_EQ(srkit::testing_process::wait_exit(first), 128 + SIGTERM);
}

TEST(OutputOwnership, TheLockFileIsNeverAnOutput) {
  const fs::path dir = fresh_dir("lockfile");
  const std::string lock = (dir / ".srkit.lock").string();
  expect_refused(train("--steps 1 --out " + dir.string() + " --json " + lock),
                 {"--json " + lock, "lock file"});
}

TEST(OutputOwnership, ALinkPlantedAtTheLogsNameIsNotFollowedOntoAFile) {
  const fs::path dir = fresh_dir("symlink");
  const fs::path victim = dir / "victim.txt";
  std::ofstream(victim) << "precious\n";
  fs::create_directories(dir / "run");
  fs::create_symlink(victim, dir / "run" / "bf16-sr.jsonl");
  expect_refused(train("--steps 1 --out " + (dir / "run").string()),
                 {(dir / "run" / "bf16-sr.jsonl").string(), "symbolic link"});
  EXPECT_EQ(read_text(victim), "precious\n");
  // A dangling link would create a file where it points: refused as well.
  fs::create_directories(dir / "run2");
  fs::create_symlink(dir / "elsewhere.txt", dir / "run2" / "bf16-sr.jsonl");
  EXPECT_EQ(train("--steps 1 --out " + (dir / "run2").string()).code, 2);
  EXPECT_FALSE(fs::exists(dir / "elsewhere.txt"));
  // A link to a device is followed: nothing is overwritten there.
  fs::create_directories(dir / "run3");
  fs::create_symlink("/dev/null", dir / "run3" / "bf16-sr.jsonl");
  const CommandResult ok = train("--steps 1 --out " + (dir / "run3").string());
  EXPECT_EQ(ok.code, 0) << ok.output;
}

}  // namespace
