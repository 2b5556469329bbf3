// The run's JSONL log across crashes: whole-line writes, the cut back to the
// checkpointed step on resume (torn lines and records past it dropped), the
// log's own lock, and a failed write reported instead of ignored.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "lib/train/run_log.h"
#include "lib/util/temp_dir.h"

using namespace srkit;
using ::testing::HasSubstr;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_all(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

const std::string kHeader = R"({"type":"config","config":{}})"
                            "\n";
std::string step_line(int step) {
  return R"({"type":"step","step":)" + std::to_string(step) +
         R"(,"loss":1.5})"
         "\n";
}

}  // namespace

TEST(RunLogResume, CutKeepsRecordsUpToTheCheckpointedStep) {
  TempDir dir("runlog");
  const std::string path = dir.file("a.jsonl");
  std::string text = kHeader;
  for (int s = 1; s <= 10; ++s) text += step_line(s);
  text += R"({"type":"eval","step":10,"val_loss":2.0})"
          "\n";
  std::string kept = text;
  for (int s = 11; s <= 13; ++s) text += step_line(s);
  write_all(path, text);
  const LogCut cut = cut_log_for_resume(path, 10);
  EXPECT_EQ(cut.kept_records, 12u);
  EXPECT_EQ(cut.dropped_records, 3u);
  EXPECT_FALSE(cut.dropped_incomplete_line);
  EXPECT_EQ(read_all(path), kept);
}

// A crash mid-write leaves a torn line; appending after it merged two records
// into one line that no reader could parse.
TEST(RunLogResume, TornLastLineIsDroppedSoRecordsNeverMerge) {
  TempDir dir("runlog");
  const std::string path = dir.file("a.jsonl");
  const std::string whole = kHeader + step_line(1) + step_line(2);
  write_all(path, whole + R"({"type":"step","st)");
  const LogCut cut = cut_log_for_resume(path, 5);
  EXPECT_TRUE(cut.dropped_incomplete_line);
  EXPECT_EQ(read_all(path), whole);
  RunLog log(path, true);
  log.begin(5);
  log.write({{"type", "resume"}, {"step", 5}});
  const std::string after = read_all(path);
  std::istringstream lines(after);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    EXPECT_TRUE(nlohmann::json::accept(line)) << line;
    ++n;
  }
  EXPECT_EQ(n, 4);
}

TEST(RunLogResume, AnEarlierSummaryAndEverythingAfterItIsCut) {
  TempDir dir("runlog");
  const std::string path = dir.file("a.jsonl");
  const std::string kept = kHeader + step_line(1) + step_line(2);
  write_all(path, kept +
                      R"({"type":"summary","summary":{}})"
                      "\n" +
                      step_line(3));
  const LogCut cut = cut_log_for_resume(path, 2);
  EXPECT_EQ(cut.dropped_records, 2u);
  EXPECT_EQ(read_all(path), kept);
}

TEST(RunLogResume, AMalformedLineEndsTheKeptPrefix) {
  TempDir dir("runlog");
  const std::string path = dir.file("a.jsonl");
  write_all(path, kHeader + "not json\n" + step_line(1));
  const LogCut cut = cut_log_for_resume(path, 9);
  EXPECT_EQ(cut.kept_records, 1u);
  EXPECT_EQ(cut.dropped_records, 2u);
  EXPECT_EQ(read_all(path), kHeader);
}

TEST(RunLogResume, MissingLogIsAnEmptyOne) {
  TempDir dir("runlog");
  const LogCut cut = cut_log_for_resume(dir.file("none.jsonl"), 3);
  EXPECT_EQ(cut.kept_records, 0u);
  EXPECT_FALSE(std::filesystem::exists(dir.file("none.jsonl")));
}

TEST(RunLog, FreshRunStartsEmptyAndWritesWholeLines) {
  TempDir dir("runlog");
  const std::string path = dir.file("a.jsonl");
  write_all(path, "old run\n");
  RunLog log(path, true);
  EXPECT_EQ(read_all(path), "old run\n");  // opening changes nothing
  log.begin(0);
  log.write({{"type", "step"}, {"step", 1}});
  EXPECT_EQ(read_all(path), "{\"step\":1,\"type\":\"step\"}\n");  // unbuffered
  EXPECT_FALSE(log.failed());
}

TEST(RunLog, ASecondWriterOfTheSameLogIsRefused) {
  TempDir dir("runlog");
  const std::string path = dir.file("a.jsonl");
  RunLog first(path, true);
  EXPECT_THAT(
      [&] {
        try {
          RunLog second(path, true);
        } catch (const std::runtime_error& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("--log " + path + ": another run is writing this log"));
}

TEST(RunLog, AFailedWriteIsRememberedNotIgnored) {
  RunLog log("/dev/full", true);
  log.begin(0);
  EXPECT_FALSE(log.failed());
  log.write({{"type", "step"}});
  ASSERT_TRUE(log.failed());
  EXPECT_THAT(log.error(), HasSubstr("--log /dev/full: cannot write: no space"));
}

TEST(RunLog, NonLeadRanksWriteNothing) {
  TempDir dir("runlog");
  RunLog log(dir.file("a.jsonl"), false);
  log.begin(0);
  log.write({{"type", "step"}});
  EXPECT_FALSE(std::filesystem::exists(dir.file("a.jsonl")));
}
