#include "lib/train/run_log.h"

#include <filesystem>
#include <stdexcept>

namespace srkit {

RunLog::RunLog(const std::string& path, bool lead, bool append) : path_(path), lead_(lead) {
  if (!lead_) return;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!out_) throw std::runtime_error("--log: cannot write " + path);
}

void RunLog::write(const nlohmann::json& line) {
  if (lead_) out_ << line.dump() << "\n";
}

void RunLog::flush() {
  if (lead_) out_ << std::flush;
}

}  // namespace srkit
