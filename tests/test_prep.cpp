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
#include "lib/data/tokenizer_files.h"
#include "lib/util/sha256.h"
#include "lib/util/temp_dir.h"
#include "tests/bpe_test_tokenizer.h"

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

// The ids of tokens given by their bytes (tests/bpe_test_tokenizer.h), as shards hold them.
std::vector<uint16_t> ids(const std::vector<std::string>& tokens) {
  std::vector<uint16_t> out;
  for (int32_t id : bpe_test::ids_of(tokens)) out.push_back(uint16_t(id));
  return out;
}

std::vector<uint16_t> concat(std::initializer_list<std::vector<uint16_t>> parts) {
  std::vector<uint16_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

const std::vector<uint16_t> kEot = {uint16_t(bpe_test::kEndOfText)};

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

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
      {f + " --out ''", "--out '': expected a folder name"},
      // A folder no file can be created in (for root too): refused before any shard.
      {f + " --out /proc", "--out /proc: cannot create files in /proc"},
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

TEST(SrPrep, BpeShardsHoldAnEndOfTextBeforeEachDocument) {
  TempDir dir("prep");
  const std::string tok = dir.file("tokenizer.json");
  bpe_test::write_tokenizer_json(tok);
  const std::string a = write_text(dir, "a.txt", "the world");
  const std::string b = write_text(dir, "b.txt", "it's 123");
  const Result r = run_prep(
      a + " " + b + " --out " + dir.file("o") + " --val-fraction 0 --name bpe --tokenizer " + tok,
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("2 input files, 2 documents, 17 bytes -> 10 tokens"));
  EXPECT_THAT(r.output, ::testing::HasSubstr("vocab 288, end-of-text 287"));
  // Worked out by hand: "the" is t+he (h+e ranks before t+h), " 123" is " "+123.
  const std::vector<uint16_t> expected =
      concat({kEot, ids({"t", "he", " world"}), kEot, ids({"i", "t", "'s", " ", "123"})});
  EXPECT_EQ(read_bin_shard(dir.file("o/bpe_train_000000.bin")), expected);

  // The record beside the shards names the tokenizer.
  const nlohmann::json record = read_json(dir.file("o/bpe_tokenizer_info.json"));
  const nlohmann::json& t = record.at("tokenizer");
  EXPECT_EQ(t.at("type"), "bpe");
  EXPECT_EQ(t.at("vocab_size"), bpe_test::kVocabSize);
  EXPECT_EQ(t.at("end_of_text"), bpe_test::kEndOfText);
  EXPECT_EQ(t.at("fingerprint"), load_tokenizer_json(tok).fingerprint);
  ASSERT_EQ(t.at("files").size(), 1u);
  EXPECT_EQ(t.at("files")[0].at("sha256"), sha256_file_hex(tok));
  EXPECT_EQ(t.at("files")[0].at("path"), fs::absolute(tok).string());
  EXPECT_EQ(record.at("documents"), 2);
  EXPECT_EQ(record.at("train_tokens"), 10);

  // GPT-2's vocab.json + merges.txt: the same tokens and fingerprint.
  bpe_test::write_vocab_merges(dir.file("vocab.json"), dir.file("merges.txt"));
  const Result again =
      run_prep(a + " " + b + " --out " + dir.file("o2") + " --val-fraction 0 --name bpe --vocab " +
                   dir.file("vocab.json") + " --merges " + dir.file("merges.txt"),
               dir);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(read_bin_shard(dir.file("o2/bpe_train_000000.bin")), expected);
  const nlohmann::json t2 = read_json(dir.file("o2/bpe_tokenizer_info.json")).at("tokenizer");
  EXPECT_EQ(t2.at("fingerprint"), t.at("fingerprint"));
  EXPECT_EQ(t2.at("files").size(), 2u);
}

TEST(SrPrep, DocumentSeparatorSplitsFiles) {
  TempDir dir("prep");
  const std::string tok = dir.file("tokenizer.json");
  bpe_test::write_tokenizer_json(tok, /*array_merges=*/true);
  const std::string f =
      write_text(dir, "stories.txt", "the world<|endoftext|> the<|endoftext|><|endoftext|>aaa");
  const Result r =
      run_prep(f + " --out " + dir.file("o") +
                   " --val-fraction 0 --doc-separator '<|endoftext|>' --tokenizer " + tok,
               dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("1 input file, 3 documents"));
  EXPECT_EQ(
      read_bin_shard(dir.file("o/stories_train_000000.bin")),
      concat({kEot, ids({"t", "he", " world"}), kEot, ids({" the"}), kEot, ids({"aa", "a"})}));

  // A separator that is not UTF-8 splits too, and the record (JSON) is still written.
  const std::string g = write_text(dir, "bytes.txt",
                                   "the\xff"
                                   "aaa");
  const Result b =
      run_prep(g + " --out " + dir.file("o") +
                   " --val-fraction 0 --doc-separator \"$(printf '\\377')\" --tokenizer " + tok,
               dir);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(read_bin_shard(dir.file("o/bytes_train_000000.bin")),
            concat({kEot, ids({"t", "he"}), kEot, ids({"aa", "a"})}));
  EXPECT_EQ(read_json(dir.file("o/bytes_tokenizer_info.json")).at("documents"), 2);
}

TEST(SrPrep, ByteLevelShardsGetARecordToo) {
  TempDir dir("prep");
  const std::string f = write_text(dir, "poem.txt", "roses are red\n");
  ASSERT_EQ(run_prep(f + " --out " + dir.file("o") + " --val-fraction 0", dir).exit_code, 0);
  const nlohmann::json t = read_json(dir.file("o/poem_tokenizer_info.json")).at("tokenizer");
  EXPECT_EQ(t.at("type"), "byte");
  EXPECT_EQ(t.at("vocab_size"), 256);
  EXPECT_TRUE(t.at("end_of_text").is_null());
}

TEST(SrPrep, BadTokenizersExitWithTwo) {
  TempDir dir("prep");
  const std::string f = write_text(dir, "t.txt", "some text here\n");
  const std::string out = " --out " + dir.file("o");
  const std::string good = dir.file("good.json");
  bpe_test::write_tokenizer_json(good);
  bpe_test::write_vocab_merges(dir.file("vocab.json"), dir.file("merges.txt"));
  const auto tokenizer_with = [&](const std::string& name, auto edit) {
    nlohmann::json j = bpe_test::tokenizer_json();
    edit(j);
    return write_text(dir, name, j.dump());
  };
  const std::string seps = write_text(dir, "seps.txt", "||||");
  const std::string not_json = write_text(dir, "bad.json", "{\"model\": ");
  const std::string wordpiece =
      tokenizer_with("wp.json", [](nlohmann::json& j) { j["model"]["type"] = "WordPiece"; });
  const std::string unknown = tokenizer_with(
      "unknown.json", [](nlohmann::json& j) { j["model"]["merges"].push_back("a zz"); });
  const std::string no_eot = tokenizer_with("noeot.json", [](nlohmann::json& j) {
    j["added_tokens"] = nlohmann::json::array();
    j["model"]["vocab"].erase("<|endoftext|>");
  });
  const std::string too_big = tokenizer_with("big.json", [](nlohmann::json& j) {
    j["added_tokens"].push_back({{"id", 70000}, {"content", "<|pad|>"}});
  });
  const std::vector<std::pair<std::string, std::string>> cases = {
      {f + out + " --tokenizer " + not_json,
       "--tokenizer: tokenizer file '" + not_json + "': expected valid JSON"},
      {f + out + " --tokenizer " + wordpiece, "model type is 'WordPiece'; expected 'BPE'"},
      {f + out + " --tokenizer " + unknown, "'zz' is not in the vocab"},
      {f + out + " --tokenizer " + no_eot, "no end-of-text token '<|endoftext|>'"},
      {f + out + " --tokenizer " + too_big, "has 70001 tokens; .bin shards hold uint16 tokens"},
      {f + out + " --tokenizer " + dir.file("missing.json"), "missing.json"},
      {f + out + " --vocab " + dir.file("vocab.json"), "--merges"},
      {f + out + " --tokenizer " + good + " --vocab " + dir.file("vocab.json") + " --merges " +
           dir.file("merges.txt"),
       "excludes"},
      {f + out + " --doc-separator x", "--doc-separator needs a tokenizer"},
      {seps + out + " --tokenizer " + good + " --doc-separator '||'", "nothing but separators"},
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
