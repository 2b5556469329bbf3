// sr-prep end to end: text in, llm.c shards out, read back with the data layer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "lib/data/bin_shard.h"
#include "lib/data/synthetic.h"
#include "lib/util/temp_dir.h"

using namespace srkit;
namespace fs = std::filesystem;

namespace {

struct Result {
  int exit_code;
  std::string output;  // stdout and stderr
};

Result run_prep(const std::string& args, const TempDir& dir) {
  const std::string log = dir.file("log.txt");
  const std::string cmd = std::string(SRKIT_BIN_DIR) + "/sr-prep " + args + " >" + log + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(log);
  Result r{WIFEXITED(status) ? WEXITSTATUS(status) : -1,
           std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>())};
  return r;
}

std::string write_text(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<uint16_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

}  // namespace

TEST(SrPrep, ShardsTrainAndValFromTwoFiles) {
  TempDir dir("prep");
  const TokenData corpus = synthetic_corpus(3, 2500);
  const std::string a(corpus.tokens.begin(), corpus.tokens.begin() + 1500);
  const std::string b(corpus.tokens.begin() + 1500, corpus.tokens.end());
  const std::string fa = write_text(dir, "a.txt", a), fb = write_text(dir, "b.txt", b);
  const std::string out = dir.file("out");
  const Result r = run_prep(
      fa + " " + fb + " --out " + out + " --shard-tokens 1000 --val-fraction 0.2 --name syn", dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // 2500 tokens: val = 500 (1 shard), train = 2000 (2 shards of 1000).
  EXPECT_THAT(r.output, ::testing::HasSubstr("2 input files, 2500 bytes -> 2500 tokens"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("train +2000 tokens +2 shards"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("val +500 tokens +1 shard"));
  EXPECT_EQ(read_bin_shard(out + "/syn_train_000000.bin").size(), 1000u);
  EXPECT_EQ(read_bin_shard(out + "/syn_train_000001.bin").size(), 1000u);
  EXPECT_FALSE(fs::exists(out + "/syn_train_000002.bin"));

  const TokenData train = load_bin_shards(out + "/syn_train_*.bin");
  const TokenData val = load_bin_shards(out + "/syn_val_*.bin");
  const std::string all = a + b;
  EXPECT_EQ(train.tokens, bytes_of(all.substr(0, 2000)));
  EXPECT_EQ(val.tokens, bytes_of(all.substr(2000)));

  // A rerun with bigger shards removes the now-stale second shard.
  const Result again = run_prep(
      fa + " " + fb + " --out " + out + " --shard-tokens 5000 --val-fraction 0.2 --name syn", dir);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_FALSE(fs::exists(out + "/syn_train_000001.bin"));
  EXPECT_EQ(load_bin_shards(out + "/syn_train_*.bin").tokens, train.tokens);
}

TEST(SrPrep, DefaultNameAndNoValSplit) {
  TempDir dir("prep");
  const std::string f = write_text(dir, "poem.txt", "roses are red\n");
  const Result r = run_prep(f + " --out " + dir.file("o") + " --val-fraction 0", dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_bin_shard(dir.file("o/poem_train_000000.bin")), bytes_of("roses are red\n"));
  EXPECT_FALSE(fs::exists(dir.file("o/poem_val_000000.bin")));
}

TEST(SrPrep, BadFlagsAndInputsExitWithTwo) {
  TempDir dir("prep");
  const std::string f = write_text(dir, "t.txt", "some text here\n");
  const std::string empty = write_text(dir, "e.txt", "");
  const std::string out = " --out " + dir.file("o");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {f + out + " --bogus", "bogus"},
      {f + out + " --shard-tokens 0", "--shard-tokens"},
      {f + out + " --shard-tokens abc", "--shard-tokens"},
      {f + out + " --val-fraction 1", "--val-fraction 1"},
      {f + out + " --val-fraction -0.5", "--val-fraction"},
      {f, "--out is required"},
      {dir.file("missing.txt") + out, "missing.txt"},
      {empty + out, "is empty"},
      {f + out + " --val-fraction 0.01", "empty val split"},
  };
  for (const auto& [args, message] : cases) {
    const Result r = run_prep(args, dir);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_THAT(r.output, ::testing::HasSubstr(message)) << args;
    EXPECT_THAT(r.output, ::testing::StartsWith("sr-prep: error: ")) << args;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
  EXPECT_FALSE(fs::exists(dir.file("o")));  // nothing is created on error
}

TEST(SrPrep, HelpExitsZero) {
  TempDir dir("prep");
  const Result r = run_prep("--help", dir);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, ::testing::HasSubstr("--shard-tokens"));
}
