// Guards that run before any work: output paths created and checked writable,
// a folder owned by one process, and memory compared with what is available.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "lib/train/memory_check.h"
#include "lib/util/dir_lock.h"
#include "lib/util/output_path.h"
#include "lib/util/system_memory.h"
#include "lib/util/temp_dir.h"
#include "tests/run_command.h"
#include "tests/test_paths.h"

using namespace srkit;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

using Exit = srkit::testing_process::CommandResult;

Exit run_tool(const std::string& tool_and_args) {
  return srkit::testing_process::run_command(std::string(SRKIT_BIN_DIR) + "/" + tool_and_args);
}

template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(OutputPath, DirectoriesAreCreatedAndFilesNeedAnExistingDirectory) {
  TempDir dir("guards");
  const std::string nested = dir.file("a/b/c");
  prepare_output_dir("--out", nested);
  EXPECT_TRUE(fs::is_directory(nested));
  EXPECT_EQ(std::distance(fs::directory_iterator(nested), fs::directory_iterator()), 0)
      << "the write probe is removed";
  EXPECT_NO_THROW(check_output_file("--json", dir.file("a/x.json")));
  EXPECT_THAT(error_of([&] { check_output_file("--json", dir.file("missing/x.json")); }),
              HasSubstr("--json " + dir.file("missing/x.json") + ": directory"));
  EXPECT_THAT(error_of([&] { check_output_file("--json", nested); }), HasSubstr("is a directory"));
}

TEST(OutputPath, UnwritablePlacesNameTheFlag) {
  TempDir dir("guards");
  std::ofstream(dir.file("plain")) << "x";
  EXPECT_THAT(error_of([&] { prepare_output_dir("--ckpt-dir", dir.file("plain/sub")); }),
              HasSubstr("--ckpt-dir " + dir.file("plain/sub") + ": cannot create the directory"));
  EXPECT_THAT(error_of([&] { prepare_output_dir("--out", dir.file("plain")); }),
              HasSubstr("--out " + dir.file("plain") + ": exists and is not a directory"));
  // Read-only: only meaningful when permissions bind (not for root).
  if (::geteuid() != 0) {
    fs::create_directory(dir.file("ro"));
    fs::permissions(dir.file("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THAT(error_of([&] { prepare_output_dir("--out", dir.file("ro")); }),
                HasSubstr("cannot create files in"));
    fs::permissions(dir.file("ro"), fs::perms::owner_all);
  }
}

TEST(DirLock, OneProcessSharesItsLockAnotherIsRefused) {
  TempDir dir("guards");
  const auto first = DirLock::acquire(dir.path(), "--out");
  const auto again = DirLock::acquire(dir.path() + "/.", "--out");  // same folder, other spelling
  EXPECT_EQ(first.get(), again.get());

  const pid_t child = fork();
  if (child == 0) {  // another process: must be refused, naming the folder and the holder
    try {
      DirLock::acquire(dir.path(), "--out");
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      const bool ok = what.find("--out " + dir.path() + " is in use by another run") == 0 &&
                      what.find("pid " + std::to_string(getppid())) != std::string::npos;
      _exit(ok ? 0 : 2);
    }
    _exit(1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: not refused; 2: message without folder or pid";
}

TEST(DirLock, ReleasedWhenTheLastHolderGoes) {
  TempDir dir("guards");
  DirLock::acquire(dir.path(), "--out").reset();
  const pid_t child = fork();
  if (child == 0) {
    try {
      DirLock::acquire(dir.path(), "--out");
      _exit(0);
    } catch (...) {
      _exit(1);
    }
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(SystemMemory, ParsesMeminfoAndCgroupFiles) {
  EXPECT_EQ(meminfo_available_bytes("MemTotal:       32000000 kB\n"
                                    "MemFree:         1000 kB\n"
                                    "MemAvailable:   24001836 kB\n"),
            size_t(24001836) * 1024);
  EXPECT_EQ(meminfo_available_bytes("MemTotal: 5 kB\n"), 0u);
  EXPECT_EQ(cgroup_value_bytes("max\n"), 0u);
  EXPECT_EQ(cgroup_value_bytes("8589934592\n"), size_t(8589934592));
  EXPECT_EQ(cgroup_value_bytes(""), 0u);
  const AvailableMemory here = available_host_memory();
  EXPECT_GT(here.bytes, 0u);
  EXPECT_FALSE(here.source.empty());
}

TEST(MemoryCheck, RefusesWithBothNumbersAndTheAdvice) {
  const AvailableMemory have{size_t(1) << 30, "MemAvailable in /proc/meminfo"};
  EXPECT_NO_THROW(require_memory("x", size_t(1) << 29, "", have, "advice"));
  EXPECT_NO_THROW(require_memory("x", size_t(1) << 40, "", AvailableMemory{0, "unknown"}, ""));
  const std::string e = error_of([&] {
    require_memory("this run on the CPU", (size_t(3) << 30) / 2, "activations 1.5 GiB", have,
                   "reduce --batch");
  });
  EXPECT_EQ(e,
            "not enough memory for this run on the CPU: needs 1.5 GiB (activations 1.5 GiB) but "
            "1.0 GiB is available (MemAvailable in /proc/meminfo); reduce --batch");
}

TEST(MemoryCheck, EstimateOfARunGrowsWithTheBatch) {
  TrainConfig small, large;
  small.model = large.model = "tiny";
  small.seq_len = large.seq_len = 64;
  large.batch = small.batch * 100;
  EXPECT_GT(run_memory_estimate(large, 1).activations,
            50 * run_memory_estimate(small, 1).activations);
  EXPECT_THAT(describe_estimate(run_memory_estimate(small, 1)), HasSubstr("activations"));
}

// Every output-file flag of the tools is checked when the command line is
// parsed: a missing folder fails in the first second with the flag named, not
// after a benchmark or audit has run.
TEST(OutputPath, EveryToolChecksItsOutputFilesBeforeWorking) {
  TempDir dir("guards");
  const std::string bad = dir.file("missing/out");
  const std::string cases[] = {
      "sr-bench train --models tiny --steps 1 --warmup 0 --json " + bad,
      "sr-bench train --models tiny --steps 1 --warmup 0 --csv " + bad,
      "sr-bench memory --models tiny --json " + bad,
      "sr-bench memory --models tiny --csv " + bad,
      "sr-audit cast -n 1000 --json " + bad,
      "sr-audit cast -n 1000 --svg " + bad,
      "sr-audit accumulate -n 100 --json " + bad,
      "sr-audit rng -n 100000 --svg " + bad,
      "sr-audit plot --svg " + bad + " " + dir.file("log.jsonl"),
      "sr-audit run --json " + bad + " " + dir.file("log.jsonl"),
      "sr-train --model tiny --steps 1 --json " + bad,
  };
  for (const std::string& args : cases) {
    const Exit r = run_tool(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(bad + ": directory " + dir.file("missing") + " does not exist"))
        << args;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
  }
}
