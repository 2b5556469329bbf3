// Every numeric flag of sr-train has a stated range, enforced on the flag's
// text before any work: out-of-range, wrapped, non-finite and malformed values
// are one-line errors naming the flag, exit 2. Also the validation-data rules.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/run_command.h"
#include "tests/test_paths.h"

namespace {

namespace fs = std::filesystem;

using Result = srkit::testing_process::CommandResult;

Result run(const std::string& args) {
  return srkit::testing_process::run_command(std::string(SRKIT_BIN_DIR) + "/sr-train " + args);
}

const std::string kTiny =
    " --model tiny --batch 2 --seq-len 16 --synthetic-bytes 16384 --sample-tokens 0 -q "
    "--no-final-ckpt --steps 2";

void expect_rejected(const std::string& args, const std::string& names, const fs::path& out) {
  const Result r = run(kTiny + " --out " + out.string() + " " + args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(names), std::string::npos) << args << "\n" << r.output;
}

struct FlagCase {
  const char* flag;
  const char* bad;  // a value outside the stated range, or not a number of the flag's kind
};

// One bad value per numeric flag; the unsigned ones also get the wrapped -1
// and 2^64, which CLI11 alone would have accepted.
const FlagCase kBadValues[] = {
    {"--layers", "0"},
    {"--layers", "-5"},
    {"--channels", "0"},
    {"--heads", "0"},
    {"--vocab", "0"},
    {"--max-seq-len", "0"},
    {"--threads", "-1"},
    {"--val-fraction", "1"},
    {"--val-fraction", "nan"},
    {"--synthetic-bytes", "-5"},
    {"--synthetic-bytes", "10"},
    {"--batch", "0"},
    {"--batch", "1e3"},
    {"--seq-len", "0"},
    {"--grad-accum", "0"},
    {"--steps", "-1"},
    {"--steps", "0"},
    {"--steps", "18446744073709551616"},
    {"--tokens", "-1"},
    {"--tokens", "18446744073709551615"},
    {"--lr", "0"},
    {"--lr", "inf"},
    {"--lr", "1e400"},
    {"--min-lr", "-2"},
    {"--warmup", "-1"},
    {"--weight-decay", "-0.1"},
    {"--beta1", "1"},
    {"--beta2", "-0.5"},
    {"--eps", "inf"},
    {"--eps", "0"},
    {"--clip", "nan"},
    {"--seed", "-1"},
    {"--seed", "12abc"},
    {"--eval-interval", "-1"},
    {"--eval-batches", "0"},
    {"--log-interval", "0"},
    {"--ckpt-interval", "-3"},
    {"--sample-tokens", "-1"},
    {"--comm-timeout", "inf"},
    {"--zero", "2"},
    {"--replica-check", "-2"},
    {"--shadow-fp32", "-1"},
    {"--shadow-every", "0"},
};

TEST(SrTrainFlags, EveryNumericFlagRejectsValuesOutsideItsRange) {
  const fs::path dir = srkit::testing_paths::fresh_dir("flags", "range");
  for (const FlagCase& c : kBadValues) {
    expect_rejected(std::string(c.flag) + " " + c.bad, c.flag, dir);
  }
  EXPECT_FALSE(fs::exists(dir / "bf16-sr.jsonl")) << "a rejected run must not start";
}

TEST(SrTrainFlags, HelpStatesEveryRange) {
  const Result r = run("--help");
  ASSERT_EQ(r.code, 0);
  for (const FlagCase& c : kBadValues) {
    const size_t at = r.output.find(std::string("  ") + c.flag + " ");
    ASSERT_NE(at, std::string::npos) << c.flag;
    const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
    EXPECT_NE(line.find(":in "), std::string::npos) << line;
  }
}

TEST(SrTrainFlags, InRangeValuesAtTheBoundsAreAccepted) {
  const fs::path dir = srkit::testing_paths::fresh_dir("flags", "bounds");
  const Result r = run(kTiny + " --out " + dir.string() +
                       " --steps 1 --seed 18446744073709551615 --eval-interval 0 --zero 0"
                       " --val-fraction 0.5 --tokens 0 --clip 0 --min-lr -1");
  EXPECT_EQ(r.code, 0) << r.output;
}

TEST(SrTrainFlags, AnEmptyOutIsRefusedNotTakenAsTheWorkingDirectory) {
  const Result r = run(kTiny + " --out ''");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--out '': expected a folder name"), std::string::npos) << r.output;
}

TEST(SrTrainFlags, ValidationDataRules) {
  const fs::path dir = srkit::testing_paths::fresh_dir("flags", "val");
  const std::string train = (dir / "train.txt").string(), val = (dir / "val.txt").string();
  std::ofstream(train) << std::string(4096, 'a');
  std::ofstream(val) << "too short";  // 9 tokens: no window of 16 + 1

  // --val-data without --data would be silently ignored.
  expect_rejected("--val-data " + val, "--val-data needs --data", dir);
  // Shorter than one window: named, not silently skipped.
  expect_rejected("--data " + train + " --val-data " + val, val, dir);
  // Out-of-vocabulary tokens in --val-data are blamed on the val file.
  const std::string val_bin = (dir / "val.bin").string();
  {
    std::ofstream f(val_bin, std::ios::binary);
    int32_t header[256] = {20240520, 1, 64};
    f.write(reinterpret_cast<const char*>(header), sizeof header);
    for (uint16_t t = 0; t < 64; ++t) {
      const uint16_t token = uint16_t(t == 7 ? 300 : t);
      f.write(reinterpret_cast<const char*>(&token), 2);
    }
  }
  const Result r =
      run(kTiny + " --out " + dir.string() + " --data " + train + " --val-data " + val_bin);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(val_bin), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(train), std::string::npos) << r.output;
  // A split tail too short for a window is an error too, with the way out named.
  std::ofstream(dir / "small.txt") << std::string(200, 'b');
  expect_rejected("--data " + (dir / "small.txt").string() + " --val-fraction 0.05",
                  "--val-fraction 0", dir);
}

}  // namespace
