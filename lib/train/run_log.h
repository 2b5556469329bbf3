// The JSONL metrics log of a run (one JSON object per line, DESIGN.md
// "Formats"), written by the lead rank only. Lines are written whole and
// flushed at the points the trainer names, so a crash loses at most the lines
// since the last flush.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace srkit {

class RunLog {
 public:
  // lead: whether this rank writes; append: continue an existing log (resume).
  // Throws std::runtime_error naming the file when it cannot be written.
  RunLog(const std::string& path, bool lead, bool append);
  void write(const nlohmann::json& line);
  void flush();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool lead_;
  std::ofstream out_;
};

}  // namespace srkit
