// sr-train as a user runs it: exit codes, one-line errors naming the culprit,
// the JSONL log, --compare's table and JSON, and SIGTERM checkpointing.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/bpe_test_tokenizer.h"
#include "tests/run_command.h"
#include "tests/special_files.h"
#include "tests/test_paths.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int code;
  std::string output;  // stdout + stderr
};

Result run(const std::string& args) {
  const srkit::testing_process::CommandResult r =
      srkit::testing_process::run_command(std::string(SRKIT_BIN_DIR) + "/sr-train " + args);
  return {r.code, r.output};
}

fs::path fresh_dir(const std::string& name) { return srkit::testing_paths::fresh_dir("cli", name); }

const std::string kTiny =
    " --model tiny --batch 2 --seq-len 16 --synthetic-bytes 16384 --sample-tokens 0 -q";

int count_lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

TEST(SrTrainCli, HelpAndVersion) {
  EXPECT_EQ(run("--help").code, 0);
  const Result v = run("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_NE(v.output.find("sr-train"), std::string::npos);
}

TEST(SrTrainCli, BadFlagsGiveOneLineErrorsAndExitTwo) {
  const fs::path dir = fresh_dir("bad");
  const std::string out = " --out " + dir.string();
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {"--batch 0", "--batch"},
      {"--lr -1", "--lr"},
      {"--seq-len 4096", "--seq-len"},
      {"--strategy bf17", "bf17"},
      {"--model gpt5", "gpt5"},
      {"--no-such-flag", "no-such-flag"},
      {"--data /nonexistent/corpus.txt", "/nonexistent/corpus.txt"},
      {"--resume /nonexistent/ckpt.safetensors", "/nonexistent/ckpt.safetensors"},
      {"--compare fp32,,bf16", "--compare"},
      {"--comm gloo", "--comm"},
      {"--comm nccl", "--device cuda"},
      {"--zero 3", "--zero"},
      {"--sr-seed random", "--sr-seed"},
      {"--replica-check -2", "--replica-check"},
      {"--comm mpi --comm-timeout nan", "--comm-timeout"},
  };
  for (const Case& c : cases) {
    const Result r = run(kTiny + out + " " + c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.output;
    EXPECT_EQ(count_lines(r.output), 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
  }
}

TEST(SrTrainCli, MisheaderedOrTruncatedDataIsNamed) {
  const fs::path dir = fresh_dir("data");
  const fs::path bad = dir / "bad.bin";
  {
    std::ofstream f(bad, std::ios::binary);
    const int32_t header[256] = {12345, 1, 10};
    f.write(reinterpret_cast<const char*>(header), sizeof header);
  }
  const Result r = run("--data " + bad.string() + kTiny + " --out " + dir.string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(bad.string()), std::string::npos) << r.output;
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
}

TEST(SrTrainCli, LogHasOneObjectPerStepAndEvalWithTelemetry) {
  const fs::path dir = fresh_dir("log");
  const fs::path log = dir / "run.jsonl";
  const Result r = run("--steps 6 --eval-interval 3 --strategy bf16" + kTiny + " --out " +
                       dir.string() + " --log " + log.string());
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream f(log);
  std::string line;
  int steps = 0, evals = 0;
  while (std::getline(f, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.at("type") == "step") {
      ++steps;
      for (const char* key : {"loss", "lr", "grad_norm", "update_weight_ratio", "erased_frac",
                              "m_stalled_frac", "v_stalled_frac", "tok_per_s"}) {
        EXPECT_TRUE(j.contains(key)) << key;
      }
    }
    if (j.at("type") == "eval") {
      ++evals;
      EXPECT_GT(j.at("val_ppl").get<double>(), 1.0);
    }
  }
  EXPECT_EQ(steps, 6);
  EXPECT_EQ(evals, 2);  // step 3 and the end
}

TEST(SrTrainCli, OneProcessReportsWorldOneAndItsCommunicationTime) {
  const fs::path dir = fresh_dir("world");
  const fs::path log = dir / "run.jsonl", json = dir / "summary.json";
  const Result r = run("--steps 3 --zero 1" + kTiny + " --out " + dir.string() + " --log " +
                       log.string() + " --json " + json.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("world "), std::string::npos) << "one process prints no world line";
  std::ifstream f(json);
  const auto summary = nlohmann::json::parse(f);
  EXPECT_EQ(summary.at("world_size"), 1);
  EXPECT_EQ(summary.at("comm"), "single");
  EXPECT_EQ(summary.at("zero"), 1);
  EXPECT_EQ(summary.at("peak_bytes_per_rank").size(), 1u);
  std::ifstream lf(log);
  std::string line;
  int steps = 0;
  while (std::getline(lf, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.at("type") == "config") {
      EXPECT_EQ(j.at("world_size"), 1);
    }
    if (j.at("type") == "step") steps += j.at("comm_ms") == 0.0;
    // One rank has nothing to exchange: no collective runs, so no phase either.
    if (j.at("type") == "summary") {
      EXPECT_FALSE(j.at("phases").contains("communication"));
    }
  }
  EXPECT_EQ(steps, 3);
  EXPECT_EQ(summary.at("comm_seconds").get<double>(), 0.0);
}

TEST(SrTrainCli, CompareWritesTableAndJson) {
  const fs::path dir = fresh_dir("compare");
  const Result r =
      run("--compare fp32,bf16-sr:v=f32,bf16 --steps 3" + kTiny + " --out " + dir.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("| strategy | train loss |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| bf16-sr:v=f32 |"), std::string::npos) << r.output;
  std::ifstream f(dir / "compare.json");
  const auto j = nlohmann::json::parse(f);
  ASSERT_EQ(j.at("runs").size(), 3u);
  EXPECT_EQ(j.at("runs")[0].at("strategy"), "fp32");
  EXPECT_EQ(j.at("runs")[0].at("bytes_per_param"), 16.0);
  EXPECT_TRUE(fs::exists(dir / "bf16.jsonl"));
}

TEST(SrTrainCli, SigtermWritesACheckpointAndExitsNonZero) {
  const fs::path dir = fresh_dir("sigterm");
  // A run far longer than the test, sent SIGTERM once its first step is logged.
  using srkit::testing_process::shell_log_has_step, srkit::testing_process::shell_wait_until;
  const Result r = run("--steps 1000000 --eval-interval 0" + kTiny + " --out " + dir.string() +
                       " --ckpt-dir " + (dir / "ckpt").string() + " 2>&1 & pid=$!; " +
                       shell_wait_until(shell_log_has_step(dir / "bf16-sr.jsonl")) +
                       "; kill -TERM $pid; wait $pid");
  EXPECT_EQ(r.code, 128 + 15) << r.output;
  EXPECT_NE(r.output.find("stopped by signal 15"), std::string::npos) << r.output;
  bool found = false;
  for (const auto& e : fs::directory_iterator(dir / "ckpt")) {
    found |= e.path().extension() == ".safetensors";
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
  EXPECT_TRUE(found);
}

}  // namespace

namespace {

TEST(SrTrainCli, SequenceLengthDefaultsToTheModelsMaximum) {
  const fs::path dir = fresh_dir("seqlen");
  const Result r =
      run("--model tiny --batch 1 --steps 1 --synthetic-bytes 16384 --sample-tokens 0 "
          "-q --out " +
          dir.string() + " --json " + (dir / "s.json").string());
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream f(dir / "bf16-sr.jsonl");
  std::string first_line;
  std::getline(f, first_line);  // {"type":"config",...}
  const auto config = nlohmann::json::parse(first_line).at("config");
  EXPECT_EQ(config.at("seq_len"), 64);  // the tiny preset's maximum
}

}  // namespace

namespace {

// Data prepared by sr-prep with the small test tokenizer (tests/bpe_test_tokenizer.h).
struct BpeData {
  fs::path dir;
  std::string tokenizer, train, val;
};

BpeData prepare_bpe_data(const std::string& name) {
  BpeData d;
  d.dir = fresh_dir(name);
  d.tokenizer = (d.dir / "tokenizer.json").string();
  srkit::bpe_test::write_tokenizer_json(d.tokenizer);
  std::string train = "the world", val = "the world";
  for (int i = 0; i < 100; ++i) train += i % 3 ? " the world" : " it's 123";
  for (int i = 0; i < 20; ++i) val += " the world";
  srkit::bpe_test::write_text((d.dir / "train.txt").string(), train);
  srkit::bpe_test::write_text((d.dir / "val.txt").string(), val);
  for (const char* split : {"train", "val"}) {
    const std::string cmd = std::string(SRKIT_BIN_DIR) + "/sr-prep " + (d.dir / split).string() +
                            ".txt --val-fraction 0 --out " + (d.dir / "data").string() +
                            " --tokenizer " + d.tokenizer + " >/dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  d.train = (d.dir / "data" / "train_train_*.bin").string();
  d.val = (d.dir / "data" / "val_train_*.bin").string();
  return d;
}

std::string bpe_run_args(const BpeData& d) {
  return "--model tiny --vocab 320 --batch 2 --seq-len 16 --steps 2 --sample-tokens 8 -q "
         "--data " +
         d.train + " --val-data " + d.val + " --out " + (d.dir / "run").string();
}

}  // namespace

TEST(SrTrainCli, TokenizerDecodesTheSample) {
  const BpeData d = prepare_bpe_data("tok");
  // The prompt is the first 16 validation tokens: <|endoftext|>, t, he, " world",
  // then " the", " world" six times.
  std::string prompt = "<|endoftext|>the world";
  for (int i = 0; i < 6; ++i) prompt += " the world";

  const Result with = run(bpe_run_args(d) + " --tokenizer " + d.tokenizer);
  ASSERT_EQ(with.code, 0) << with.output;
  EXPECT_NE(with.output.find("sample:\n" + prompt), std::string::npos) << with.output;
  EXPECT_EQ(with.output.find("warning"), std::string::npos) << with.output;

  const Result without = run(bpe_run_args(d));
  ASSERT_EQ(without.code, 0) << without.output;
  EXPECT_NE(without.output.find("sample:\n<287><" + std::to_string(srkit::bpe_test::id("t"))),
            std::string::npos)
      << without.output;

  // The same tokenizer in GPT-2's two files: no warning either.
  srkit::bpe_test::write_vocab_merges((d.dir / "vocab.json").string(),
                                      (d.dir / "merges.txt").string());
  const Result pair = run(bpe_run_args(d) + " --tokenizer " + (d.dir / "vocab.json").string());
  ASSERT_EQ(pair.code, 0) << pair.output;
  EXPECT_NE(pair.output.find("sample:\n" + prompt), std::string::npos) << pair.output;
  EXPECT_EQ(pair.output.find("warning"), std::string::npos) << pair.output;
}

TEST(SrTrainCli, TokenizerOtherThanTheDatasWarns) {
  const BpeData d = prepare_bpe_data("tokwarn");
  nlohmann::json other = srkit::bpe_test::tokenizer_json();
  std::swap(other["model"]["merges"][0], other["model"]["merges"][1]);
  const std::string path = (d.dir / "other.json").string();
  srkit::bpe_test::write_text(path, other.dump());
  const Result r = run(bpe_run_args(d) + " --tokenizer " + path);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: --tokenizer '" + path + "' (fingerprint "), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("is not the tokenizer the data "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("was prepared with (" + d.tokenizer + ", fingerprint "),
            std::string::npos)
      << r.output;
}

TEST(SrTrainCli, BadTokenizerIsOneLineNamingTheFlag) {
  const BpeData d = prepare_bpe_data("tokbad");
  const std::string broken = (d.dir / "broken.json").string();
  srkit::bpe_test::write_text(broken, "{\"model\": 3");
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {bpe_run_args(d) + " --tokenizer " + broken,
       "--tokenizer: tokenizer file '" + broken + "': expected valid JSON"},
      {bpe_run_args(d) + " --tokenizer " + (d.dir / "none.json").string(), "none.json"},
      // Byte-level data and a model of 256 tokens: the tokenizer's 288 do not fit.
      {"--model tiny --batch 2 --seq-len 16 --steps 2 --synthetic-bytes 16384 -q --out " +
           (d.dir / "run").string() + " --tokenizer " + d.tokenizer,
       "--tokenizer '" + d.tokenizer + "' has 288 tokens but the model's vocabulary is 256"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.output;
    EXPECT_EQ(count_lines(r.output), 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find("--tokenizer"), std::string::npos) << r.output;
  }
}

// --data, --val-data and --resume given a FIFO (which would block a plain open
// or read forever), a directory or a device: one line naming the path and what
// it is, exit 2, at once.
TEST(SrTrainCli, InputsThatAreNotRegularFilesAreNamedNotHungOn) {
  const srkit::testing_files::HangGuard guard(60);
  const srkit::testing_files::SpecialFiles files;
  const fs::path dir = fresh_dir("special");
  const std::string out = " --out " + dir.string();
  const std::string fifo_bin = files.directory() + "/shard.bin";
  ASSERT_EQ(::mkfifo(fifo_bin.c_str(), 0600), 0);
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {"--resume " + files.fifo(), "--resume '" + files.fifo() + "': is a FIFO"},
      {"--resume /dev/null", "--resume '/dev/null': is a character device"},
      {"--data " + files.fifo(), "text file '" + files.fifo() + "': is a FIFO"},
      {"--data " + fifo_bin, "token shard '" + fifo_bin + "': is a FIFO"},
      {"--data " + files.directory(), "text file '" + files.directory() + "': is a directory"},
      {"--data " + files.missing() + ".bin",
       "token shard '" + files.missing() + ".bin': does not exist"},
  };
  for (const Case& c : cases) {
    const Result r = run(kTiny + out + " --steps 1 " + c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.output;
    EXPECT_EQ(count_lines(r.output), 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
  }
}
