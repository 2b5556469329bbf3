// sr-bench as a user runs it: the train table, CSV and JSON for the tiny
// preset, the out-of-memory path under a planted allocation limit, the memory
// table, and bad flags (one-line error, exit 2).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "lib/precision.h"
#include "lib/train/memory_model.h"
#include "tests/run_command.h"
#include "tests/test_paths.h"

namespace srkit {
namespace {

namespace fs = std::filesystem;

struct Result {
  int code;
  std::string out;  // stdout
  std::string err;  // stderr
};

Result run(const std::string& args) {
  const srkit::testing_process::SplitResult r =
      srkit::testing_process::run_command_split(std::string(SRKIT_BIN_DIR) + "/sr-bench " + args);
  return {r.code, r.out, r.err};
}

fs::path fresh_dir(const std::string& name) {
  return srkit::testing_paths::fresh_dir("sr_bench", name);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) lines.push_back(line);
  return lines;
}

// Markdown table rows (lines starting with '|') of the first table in text.
std::vector<std::string> table_rows(const std::string& text) {
  std::vector<std::string> rows;
  bool in_table = false;
  for (const std::string& l : lines_of(text)) {
    if (l.rfind("|", 0) == 0) {
      rows.push_back(l);
      in_table = true;
    } else if (in_table) {
      break;
    }
  }
  return rows;
}

int count(const std::string& s, char c) { return int(std::count(s.begin(), s.end(), c)); }

const std::string kTinyTrain =
    "train --models tiny --batches 2 --seq-len 32 --steps 2 --warmup 1 --threads 2";

const std::string kBudgetTrain =
    "train --models tiny --seq-len 64 --strategies mixed,bf16-sr --tokens-per-step 512 "
    "--steps 1 --warmup 1 --threads 2";

TEST(SrBenchCli, HelpAndVersion) {
  EXPECT_EQ(run("--help").code, 0);
  EXPECT_EQ(run("train --help").code, 0);
  EXPECT_EQ(run("memory --help").code, 0);
  const Result v = run("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_NE(v.out.find("sr-bench"), std::string::npos);
}

TEST(SrBenchCli, TrainTableCsvAndJsonForTheTinyPreset) {
  const fs::path dir = fresh_dir("train");
  const Result r = run(kTinyTrain + " --strategies mixed,bf16-sr --phases --csv " +
                       (dir / "t.csv").string() + " --json " + (dir / "t.json").string());
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  // Markdown: header, rule and one row per strategy, every row as wide as the header.
  const std::vector<std::string> rows = table_rows(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.out;
  EXPECT_NE(rows[0].find("ms/step median"), std::string::npos);
  EXPECT_NE(rows[0].find("MFU"), std::string::npos);
  EXPECT_NE(rows[0].find("speedup vs mixed"), std::string::npos);
  for (const std::string& row : rows) EXPECT_EQ(count(row, '|'), count(rows[0], '|')) << row;
  EXPECT_EQ(rows[2].rfind("| tiny | mixed | 2 | 32 |", 0), 0u) << rows[2];
  EXPECT_EQ(rows[3].rfind("| tiny | bf16-sr | 2 | 32 |", 0), 0u) << rows[3];
  EXPECT_NE(rows[2].find("| 1.00x | 1.00x |"), std::string::npos) << rows[2];
  // --phases and the per-strategy summaries.
  EXPECT_NE(r.out.find("forward ms"), std::string::npos);
  EXPECT_NE(r.out.find("\nmixed: 1/1 cells ran"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nbf16-sr: 1/1 cells ran; vs mixed "), std::string::npos) << r.out;
  // Progress on stderr, one line per cell start and end plus the peak line.
  EXPECT_EQ(count(r.err, '\n'), 5) << r.err;

  std::ifstream csv(dir / "t.csv");
  std::stringstream csv_text;
  csv_text << csv.rdbuf();
  const std::vector<std::string> csv_lines = lines_of(csv_text.str());
  ASSERT_EQ(csv_lines.size(), 3u);
  for (const std::string& l : csv_lines) EXPECT_EQ(count(l, ','), count(csv_lines[0], ',')) << l;

  std::ifstream jf(dir / "t.json");
  const nlohmann::json j = nlohmann::json::parse(jf);
  // Each cell's MFU is against the peak of its strategy's compute dtype: both
  // compute in bf16, so only the bf16 GEMM rate is measured.
  ASSERT_TRUE(j["peaks"].contains("bf16")) << j["peaks"];
  EXPECT_FALSE(j["peaks"].contains("f32")) << j["peaks"];
  const double bf16_peak = j["peaks"]["bf16"]["gflops"];
  EXPECT_GT(bf16_peak, 0.0);
  EXPECT_EQ(j["timed_steps"], 2);
  ASSERT_EQ(j["cells"].size(), 2u);
  for (const nlohmann::json& c : j["cells"]) {
    EXPECT_EQ(c["status"], "ok");
    EXPECT_EQ(c["timed_steps"], 2);
    const double median = c["ms_per_step"]["median"];
    EXPECT_LE(c["ms_per_step"]["min"].get<double>(), median);
    EXPECT_GE(c["ms_per_step"]["max"].get<double>(), median);
    EXPECT_NEAR(c["tokens_per_s"].get<double>(), 64.0 / (median * 1e-3), 1e-6 * 64e3 / median);
    EXPECT_GT(c["mfu"].get<double>(), 0.0);
    EXPECT_EQ(c["peak_gflops"].get<double>(), bf16_peak);
    EXPECT_NEAR(c["mfu"].get<double>(), c["gflops"].get<double>() / bf16_peak, 1e-9);
    for (const char* key :
         {"weights", "master", "grads", "opt_state", "activations", "scratch", "total"}) {
      EXPECT_TRUE(c["peak_bytes"].contains(key)) << key;
    }
    EXPECT_TRUE(c["phase_ms_per_step"].contains("forward"));
    EXPECT_TRUE(c["phase_ms_per_step"].contains("backward"));
    EXPECT_TRUE(c["phase_ms_per_step"].contains("optimizer"));
  }
  // bf16-sr keeps 8 of mixed's 16 state bytes per parameter.
  EXPECT_DOUBLE_EQ(j["cells"][0]["state_bytes_per_param"].get<double>(), 16.0);
  EXPECT_DOUBLE_EQ(j["cells"][1]["state_bytes_per_param"].get<double>(), 8.0);
  EXPECT_LT(j["cells"][1]["memory_vs_mixed"].get<double>(), 1.0);
  EXPECT_EQ(j["summaries"].size(), 2u);
}

TEST(SrBenchCli, CellOverThePlantedLimitIsOomAndTheRestCompletes) {
  // A limit between what bf16-sr and fp32 allocate for this cell.
  auto accounted = [](const char* strategy) {
    MemoryScenario s;
    s.model = gpt_preset("tiny");
    s.strategy = strategy_from_string(strategy);
    s.batch = 2;
    s.seq_len = 32;
    return double(estimate_memory(s).accounted());
  };
  const double lo = accounted("bf16-sr"), hi = accounted("fp32");
  ASSERT_LT(lo * 1.2, hi);
  char limit[64];
  std::snprintf(limit, sizeof limit, "%.6f", 0.5 * (lo + hi) / 1048576.0);
  const fs::path dir = fresh_dir("oom");
  const Result r = run(kTinyTrain + " --strategies fp32,bf16-sr --mem-limit-mb " + limit +
                       " --json " + (dir / "oom.json").string());
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::vector<std::string> rows = table_rows(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.out;
  EXPECT_EQ(rows[2].rfind("| tiny | fp32 | 2 | 32 | OOM |", 0), 0u) << rows[2];
  EXPECT_EQ(rows[3].find("OOM"), std::string::npos) << rows[3];
  EXPECT_NE(r.err.find("OOM"), std::string::npos) << r.err;
  std::ifstream jf(dir / "oom.json");
  const nlohmann::json j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["cells"][0]["status"], "OOM");
  EXPECT_NE(j["cells"][0]["message"].get<std::string>().find("out of memory"), std::string::npos);
  EXPECT_EQ(j["cells"][1]["status"], "ok");
  EXPECT_NE(r.out.find("fp32: 0/1 cells ran"), std::string::npos) << r.out;
}

TEST(SrBenchCli, MemoryTableAndJson) {
  const fs::path dir = fresh_dir("memory");
  const Result r = run("memory --models tiny,neo-6.7b --world 1,8 --zero 0,1 --json " +
                       (dir / "m.json").string());
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::vector<std::string> rows = table_rows(r.out);
  ASSERT_EQ(rows.size(), 2u + 2 * 2 * 2 * 7) << r.out;      // models x worlds x stages x strategies
  EXPECT_NE(rows[0].find("total GiB"), std::string::npos);  // auto unit: 6.7B needs GiB
  std::ifstream jf(dir / "m.json");
  const nlohmann::json j = nlohmann::json::parse(jf);
  ASSERT_EQ(j.size(), 2u * 2 * 2 * 7);
  for (const nlohmann::json& row : j) {
    const double saving = row["saving_vs_mixed"];
    if (row["strategy"] == "mixed") {
      EXPECT_DOUBLE_EQ(saving, 0.0);
    }
    if (row["strategy"] == "bf16-sr") {
      EXPECT_GT(saving, 0.0);
    }
    const nlohmann::json& b = row["bytes"];
    EXPECT_EQ(b["total"].get<size_t>(), b["weights"].get<size_t>() + b["master"].get<size_t>() +
                                            b["grads"].get<size_t>() + b["moments"].get<size_t>() +
                                            b["kahan"].get<size_t>() +
                                            b["activations"].get<size_t>() +
                                            b["scratch"].get<size_t>() + b["comm"].get<size_t>());
  }
}

TEST(SrBenchCli, MemoryMeasureMatchesTheModel) {
  const Result r =
      run("memory --models tiny --batches 2 --seq-len 32 --strategies mixed,bf16-sr "
          "--measure --threads 2 --recompute both");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::vector<std::string> rows = table_rows(r.out);
  ASSERT_EQ(rows.size(), 6u) << r.out;  // recomputation is measured too
  // The error column: predicted / measured - 1, to 0.01% (the model is exact
  // up to a few bytes of transient staging buffers).
  for (size_t i = 2; i < rows.size(); ++i) {
    EXPECT_NE(rows[i].find("0.00% |"), std::string::npos) << rows[i];
  }
}

// bf16-sr's 8 bytes per parameter fit neo-6.7b on one 80 GiB device where
// mixed's 16 do not, even with recomputation: the memory model's answer,
// nothing run.
TEST(SrBenchCli, MemoryBudgetAnswersWithoutRunning) {
  const fs::path dir = fresh_dir("memory_budget");
  const Result r =
      run("memory --models neo-6.7b --seq-len 2048 --device cuda --strategies mixed,bf16-sr "
          "--memory-budget 80GiB --json " +
          (dir / "b.json").string());
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("| neo-6.7b | mixed | 1 | 0 | 2048 | on | does not fit |"),
            std::string::npos)
      << r.out;
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "b.json"));
  EXPECT_EQ(j["budget_bytes"].get<size_t>(), size_t(80) << 30);
  ASSERT_EQ(j["answers"].size(), 4u);  // recompute off, on x mixed, bf16-sr
  for (const nlohmann::json& a : j["answers"]) {
    const bool sr = a["strategy"] == "bf16-sr";
    EXPECT_EQ(a["fits"].get<bool>(), sr) << a.dump();
    if (sr) {
      EXPECT_GE(a["largest_batch"].get<int>(), 1);
      EXPECT_LE(a["total_bytes_at_largest"].get<size_t>(), size_t(80) << 30);
    } else {
      EXPECT_GT(a["least_bytes"].get<size_t>(), size_t(80) << 30);
    }
  }
}

// The search end to end: every strategy's choice ran, within the budget, and
// the JSON and SVG say so.
TEST(SrBenchCli, TrainAtAMemoryBudget) {
  const fs::path dir = fresh_dir("train_budget");
  const Result r = run(kBudgetTrain + " --memory-budget 3MiB --json " + (dir / "b.json").string() +
                       " --svg " + (dir / "b.svg").string());
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("each strategy's best within 3.0 MiB"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "b.json"));
  ASSERT_EQ(j["choices"].size(), 2u);
  for (const nlohmann::json& c : j["choices"]) {
    ASSERT_TRUE(c["chosen"].is_number()) << c.dump();
    const nlohmann::json& chosen = c["candidates"][c["chosen"].get<size_t>()];
    EXPECT_EQ(chosen["status"], "chosen");
    EXPECT_LE(chosen["cell"]["peak_bytes"]["total"].get<size_t>(), size_t(3) << 20);
    EXPECT_EQ(chosen["batch"].get<int>() * chosen["grad_accum"].get<int>(), 8);
  }
  std::ifstream svg(dir / "b.svg");
  const std::string doc((std::istreambuf_iterator<char>(svg)), {});
  size_t series = 0;
  for (size_t at = doc.find("class=\"series\""); at != std::string::npos;
       at = doc.find("class=\"series\"", at + 1)) {
    ++series;
  }
  EXPECT_EQ(series, 4u) << "two panels x two strategies";
}

TEST(SrBenchCli, BadFlagsGiveOneLineErrorsAndExitTwo) {
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {kTinyTrain + " --batches 0", "--batches"},
      {kTinyTrain + " --batches two", "--batches"},
      {kTinyTrain + " --strategies mixed,bf17", "bf17"},
      {kTinyTrain + " --models tiny,gpt5", "gpt5"},
      {kTinyTrain + " --seq-len 4096", "--seq-len"},
      {kTinyTrain + " --steps 0", "--steps"},
      {kTinyTrain + " --mem-limit-mb -1", "--mem-limit-mb"},
      {kTinyTrain + " --device tpu", "--device"},
      {kTinyTrain + " --no-such-flag", "no-such-flag"},
      {"memory --zero 3", "--zero"},
      {"memory --world 0", "--world"},
      {"memory --recompute sometimes", "--recompute"},
      {"memory --unit KiB", "--unit"},
      {"memory --models tiny --seq-len 65", "--seq-len"},
      {"memory --channels 100 --heads 3", "heads"},
      {"memory --models tiny --memory-budget lots", "--memory-budget: expected a size"},
      {"memory --models tiny --memory-budget 3MiB --batches 2", "--batches"},
      {"memory --models tiny --memory-budget 3MiB --measure", "--measure"},
      {kBudgetTrain + " --memory-budget 1MiB", "tiny bf16-sr needs at least"},
      {kBudgetTrain + " --memory-budget 0", "--memory-budget"},
      {kBudgetTrain + " --memory-budget 3MiB --batches 2", "--batches"},
      {kBudgetTrain + " --memory-budget 3MiB --tokens-per-step 100", "--tokens-per-step 100"},
      {kBudgetTrain + " --memory-budget 3MiB --candidates some", "--candidates"},
      {"train --models tiny --seq-len 64 --memory-budget 3MiB", "--tokens-per-step: required"},
      {kTinyTrain + " --tokens-per-step 64", "--tokens-per-step: only with --memory-budget"},
      {"", "subcommand"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.out << r.err;
    EXPECT_EQ(count(r.err, '\n'), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace srkit
