// Reading sr-train JSONL logs back (lib/audit/run_log.h) and summarizing their
// rounding telemetry: windows average the right steps, a planted stagnation is
// flagged, a healthy run is not, and every kind of bad input is an
// std::invalid_argument naming the file and line.
#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>
#include <string>

#include "lib/audit/run_log.h"
#include "lib/util/temp_dir.h"
#include "tests/special_files.h"

namespace srkit::audit {
namespace {

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// A log whose erased fraction grows from 0 to 0.9 over 8 steps (the planted
// stagnation), with an eval and two shadow lines.
std::string stagnating_log() {
  std::string s =
      "{\"type\":\"config\",\"config\":{\"strategy\":\"bf16\",\"steps\":8}}\n"
      "{\"type\":\"other\",\"note\":\"skipped\"}\n\n";
  for (int i = 1; i <= 8; ++i) {
    const double erased = i <= 4 ? 0.0 : 0.9;
    s += "{\"type\":\"step\",\"step\":" + std::to_string(i) +
         ",\"loss\":" + std::to_string(5 - i * 0.25) +
         ",\"lr\":0.001,\"grad_norm\":1,\"update_weight_ratio\":0.001,\"erased_frac\":" +
         std::to_string(erased) +
         ",\"m_stalled_frac\":0.1,\"v_stalled_frac\":" + std::to_string(i <= 4 ? 0.0 : 0.6) + "}\n";
  }
  s += "{\"type\":\"eval\",\"step\":8,\"val_loss\":3.5,\"val_ppl\":33}\n";
  s += "{\"type\":\"shadow\",\"step\":4,\"mean_abs_ulps\":1,\"max_abs_ulps\":3,\"rel_drift\":0.01}"
       "\n";
  s += "{\"type\":\"shadow\",\"step\":8,\"mean_abs_ulps\":3,\"max_abs_ulps\":9,\"rel_drift\":0.02}"
       "\n";
  return s;
}

TEST(AuditRunLog, ReadsEveryRecordType) {
  TempDir dir("runlog");
  const RunLog log = read_run_log(write(dir, "a.jsonl", stagnating_log()));
  EXPECT_EQ(log.strategy, "bf16");
  ASSERT_EQ(log.steps.size(), 8u);
  EXPECT_EQ(log.steps[7].step, 8u);
  EXPECT_DOUBLE_EQ(log.steps[0].loss, 4.75);
  ASSERT_EQ(log.evals.size(), 1u);
  EXPECT_DOUBLE_EQ(log.evals[0].val_loss, 3.5);
  ASSERT_EQ(log.shadows.size(), 2u);
  EXPECT_DOUBLE_EQ(log.shadows[1].max_abs_ulps, 9);
}

TEST(AuditRunLog, WindowsAverageAndPlantedStagnationIsFlagged) {
  TempDir dir("runlog");
  const RunSummary s = summarize(read_run_log(write(dir, "a.jsonl", stagnating_log())), 2, 0.5);
  ASSERT_EQ(s.windows.size(), 2u);
  EXPECT_EQ(s.windows[0].first_step, 1u);
  EXPECT_EQ(s.windows[0].last_step, 4u);
  EXPECT_DOUBLE_EQ(s.windows[0].erased_frac, 0.0);
  EXPECT_NEAR(s.windows[1].erased_frac, 0.9, 1e-12);
  EXPECT_NEAR(s.windows[1].loss, (3.75 + 3.5 + 3.25 + 3.0) / 4, 1e-12);
  ASSERT_EQ(s.flags.size(), 2u);  // weights and v; m (0.1) is below the threshold
  EXPECT_NE(s.flags[0].find("weights stagnate: 90.0%"), std::string::npos) << s.flags[0];
  EXPECT_NE(s.flags[1].find("v stalls"), std::string::npos) << s.flags[1];
  EXPECT_TRUE(s.has_shadow);
  EXPECT_EQ(s.last_shadow.step, 8u);
  EXPECT_DOUBLE_EQ(s.mean_shadow_ulps, 2.0);
  // One window over everything: 0.45 erased and 0.3 v stalled, below the threshold.
  EXPECT_TRUE(summarize(read_run_log(dir.path() + "/a.jsonl"), 1, 0.5).flags.empty());
  const std::string table = telemetry_markdown({s});
  EXPECT_NE(table.find("| bf16 | 5-8 |"), std::string::npos) << table;
  EXPECT_NE(shadow_markdown({s}).find("| 8 | 3 | 9 | 0.02 | 2 |"), std::string::npos);
}

TEST(AuditRunLog, BadInputThrowsNamingFileAndLine) {
  TempDir dir("runlog");
  auto expect_error = [&](const std::string& text, const std::string& needle) {
    const std::string path = write(dir, "bad.jsonl", text);
    try {
      read_run_log(path);
      ADD_FAILURE() << "no error for: " << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line";
    }
  };
  // Malformed with its newline: the line is complete, so it is an error.
  expect_error("{\"type\":\"step\",\"step\":1,\"loss\":2}\n{\"type\":\"step\"\n",
               "bad.jsonl:2: not a JSON");
  expect_error("{\"type\":\"step\",\"step\":1,\"loss\":2}\nnot json\n{\"type\":\"step\"",
               "bad.jsonl:2: not a JSON");
  expect_error("[1,2]\n", "bad.jsonl:1: expected an object");
  expect_error("{\"step\":1}\n", "expected an object with a string \"type\"");
  expect_error("{\"type\":\"step\",\"step\":1}\n", "missing numeric field 'loss'");
  expect_error("{\"type\":\"step\",\"step\":\"one\",\"loss\":1}\n", "'step'");
  expect_error("{\"type\":\"shadow\",\"step\":1,\"mean_abs_ulps\":1}\n", "'max_abs_ulps'");
  expect_error("", "no step records");
  expect_error("{\"type\":\"config\"}\n", "no step records");
  EXPECT_THROW(read_run_log(dir.path() + "/missing.jsonl"), std::invalid_argument);
  // A last line that parses is a record even without its newline.
  EXPECT_EQ(read_run_log(write(dir, "nonl.jsonl", "{\"type\":\"step\",\"step\":3,\"loss\":2}"))
                .steps.at(0)
                .step,
            3u);
  const RunLog ok = read_run_log(write(dir, "ok.jsonl", stagnating_log()));
  EXPECT_THROW(summarize(ok, 0, 0.5), std::invalid_argument);
  EXPECT_THROW(summarize(ok, 2, 0.0), std::invalid_argument);
  EXPECT_THROW(summarize(ok, 2, 1.5), std::invalid_argument);
}

// A writer killed mid-line leaves a last line without its newline: the records
// before it are kept and a warning names the file and line.
TEST(AuditRunLog, AnIncompleteLastLineIsIgnoredWithAWarning) {
  TempDir dir("runlog");
  const std::string path =
      write(dir, "cut.jsonl", stagnating_log() + "{\"type\":\"step\",\"step\":9,\"lo");
  const RunLog log = read_run_log(path);
  EXPECT_EQ(log.steps.size(), 8u);
  EXPECT_EQ(log.shadows.size(), 2u);
  ASSERT_EQ(log.warnings.size(), 1u);
  EXPECT_EQ(log.warnings[0], path + ":15: last line incomplete, ignored");
  EXPECT_TRUE(read_run_log(write(dir, "whole.jsonl", stagnating_log())).warnings.empty());
}

// Numbers a cast to uint64_t cannot hold, and literals beyond the double range,
// are one-line errors naming the file, line and field (never nlohmann's text).
TEST(AuditRunLog, OutOfRangeNumbersNameFileLineAndField) {
  TempDir dir("runlog");
  const std::string good = "{\"type\":\"step\",\"step\":1,\"loss\":2}\n";
  struct Case {
    std::string line, expect;
  };
  const Case cases[] = {
      {R"({"type":"step","step":-5,"loss":1})",
       "bad.jsonl:2: field 'step': expected a non-negative integer, got -5"},
      {R"({"type":"step","step":1e300,"loss":1})",
       "bad.jsonl:2: field 'step': expected a non-negative integer, got 1e+300"},
      {R"({"type":"step","step":2.5,"loss":1})",
       "field 'step': expected a non-negative integer, got 2.5"},
      {R"({"type":"step","step":18446744073709551616,"loss":1})",
       "field 'step': expected a non-negative integer"},
      {R"({"type":"step","step":2,"loss":1e309})",
       "bad.jsonl:2: field 'loss': number outside the range of a double"},
      {R"({"type":"step","step":2,"loss":1,"lr":-1e400})",
       "bad.jsonl:2: field 'lr': number outside the range"},
      {R"({"type":"eval","step":-1,"val_loss":1})", "bad.jsonl:2: field 'step'"},
      {R"({"type":"shadow","step":1e19,"mean_abs_ulps":1,"max_abs_ulps":1,"rel_drift":0})",
       "bad.jsonl:2: field 'step'"},
  };
  for (const Case& c : cases) {
    try {
      read_run_log(write(dir, "bad.jsonl", good + c.line + "\n" + good));
      ADD_FAILURE() << "no error for " << c.line;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("json.exception"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
  // The largest step is fine.
  EXPECT_EQ(read_run_log(write(dir, "max.jsonl",
                               R"({"type":"step","step":18446744073709551615,"loss":1e308})"
                               "\n"))
                .steps.at(0)
                .step,
            18446744073709551615ull);
}

TEST(AuditRunLog, AnythingButARegularFileIsRefusedSayingWhatItIs) {
  const testing_files::HangGuard guard;
  const testing_files::SpecialFiles files;
  for (const testing_files::SpecialPath& p : files.all()) {
    try {
      read_run_log(p.path);
      ADD_FAILURE() << p.path;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("sr-train log '" + p.path + "': " + p.kind),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace srkit::audit
