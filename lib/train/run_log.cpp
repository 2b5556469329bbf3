#include "lib/train/run_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace srkit {

RunLog::RunLog(const std::string& path, bool lead) : path_(path), lead_(lead) {
  if (!lead_) return;
  // A link planted at the log's name must not redirect the run's writes onto a
  // file it points at (the checkpoint writer never follows one either). A link
  // to a device, a FIFO or a terminal (/dev/stdout) is followed: nothing is
  // overwritten there.
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  struct stat target {};
  if (fd_ < 0 && errno == ELOOP) {
    if (::stat(path.c_str(), &target) != 0 || S_ISREG(target.st_mode)) {
      throw std::runtime_error("--log " + path +
                               ": is a symbolic link to a file; the log is not written through "
                               "links: remove the link or name its target");
    }
    fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  }
  if (fd_ < 0) throw std::runtime_error("--log " + path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  regular_ = ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
  if (regular_ && ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error("--log " + path + ": " +
                             (err == EWOULDBLOCK ? std::string("another run is writing this log")
                                                 : std::string(std::strerror(err))));
  }
}

LogCut RunLog::begin(uint64_t resume_step) {
  if (!lead_ || !regular_) return {};
  if (resume_step > 0) return cut_log_for_resume(path_, resume_step);
  if (::ftruncate(fd_, 0) != 0) {
    throw std::runtime_error("--log " + path_ + ": cannot truncate: " + std::strerror(errno));
  }
  return {};
}

RunLog::~RunLog() {
  if (fd_ >= 0) ::close(fd_);
}

void RunLog::write(const nlohmann::json& line) {
  if (!lead_ || failed()) return;
  const std::string text = line.dump() + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      const bool full = err == ENOSPC || err == EDQUOT || err == EFBIG;
      error_ = "--log " + path_ + ": cannot write" + (full ? ": no space (" : " (") +
               std::strerror(err) + ")";
      return;
    }
    done += size_t(n);
  }
}

LogCut cut_log_for_resume(const std::string& path, uint64_t step) {
  LogCut cut;
  std::ifstream in(path, std::ios::binary);
  if (!in) return cut;  // no log yet: the resumed run starts one
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  size_t keep_bytes = 0, at = 0;
  bool cutting = false;
  while (at < text.size()) {
    const size_t newline = text.find('\n', at);
    if (newline == std::string::npos) {  // torn by a crash mid-write
      cut.dropped_incomplete_line = true;
      break;
    }
    const nlohmann::json record = nlohmann::json::parse(
        text.begin() + std::ptrdiff_t(at), text.begin() + std::ptrdiff_t(newline), nullptr, false);
    const bool keep = !cutting && record.is_object() && record.value("type", "") != "summary" &&
                      (!record.contains("step") || !record["step"].is_number_unsigned() ||
                       record["step"].get<uint64_t>() <= step);
    if (keep) {
      ++cut.kept_records;
      keep_bytes = newline + 1;
    } else {
      cutting = true;
      ++cut.dropped_records;
    }
    at = newline + 1;
  }
  if (keep_bytes < text.size() && ::truncate(path.c_str(), off_t(keep_bytes)) != 0) {
    throw std::runtime_error("--log " + path +
                             ": cannot cut back for the resume: " + std::strerror(errno));
  }
  return cut;
}

}  // namespace srkit
