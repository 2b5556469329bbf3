// The JSONL metrics log of a run (one JSON object per line, docs/architecture.md
// "Formats"), written by the lead rank only.
//
// Crash safety: every record is one write(2) of the whole line, newline
// included, so a crash can at worst leave the line in progress incomplete;
// nothing is buffered in the process. A resumed run first cuts the log back to
// the records of the steps its checkpoint holds (cut_log_for_resume), so the
// resumed records follow on from there and a torn last line never merges with
// the next record.
//
// A failed write (full disk, I/O error) is not silent: the log remembers the
// first failure and the trainer stops the run with it after a last checkpoint.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace srkit {

struct LogCut;

class RunLog {
 public:
  // lead: whether this rank writes. Opens (creating) the log without changing
  // it, and locks a regular file for this process (flock), so two runs never
  // write one log; a device such as /dev/stdout is written as is. Throws
  // std::runtime_error naming --log when it cannot be opened or is locked.
  RunLog(const std::string& path, bool lead);
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  // Starts the log: empty for a fresh run (resume_step 0), else cut back to
  // the checkpointed step (cut_log_for_resume). Returns what was cut.
  LogCut begin(uint64_t resume_step);
  void write(const nlohmann::json& line);
  // Whether a write failed, and the first failure ("--log PATH: cannot write: ...").
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool lead_;
  bool regular_ = false;
  int fd_ = -1;
  std::string error_;
};

// What cut_log_for_resume removed.
struct LogCut {
  uint64_t kept_records = 0;
  uint64_t dropped_records = 0;  // complete records after the checkpoint (redone by the resume)
  bool dropped_incomplete_line = false;  // a torn last line (a crash mid-write)
};

// Cuts the log at `path` back to its records up to the checkpointed step: it
// keeps the longest prefix of complete, parseable lines whose "step" (if any)
// is <= step and which are not an earlier run's summary, and truncates the
// rest. A missing file is an empty log. Throws naming the file on I/O errors.
LogCut cut_log_for_resume(const std::string& path, uint64_t step);

}  // namespace srkit
