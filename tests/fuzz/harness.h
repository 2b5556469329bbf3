// What the libFuzzer harnesses share: a regular file in memory, and the check
// that an error message is one line.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace srkit::fuzz {

// The readers under test take a path; a memfd (named by /proc/self/fd/N) is a
// regular file that needs no disk and no clean-up, so each input runs through
// the real open, fstat and pread path of lib/util/regular_file.h.
class MemoryFile {
 public:
  MemoryFile() : fd_(::memfd_create("srkit-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) std::abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  // Replaces the content with the input and returns the path to open.
  const std::string& holding(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) std::abort();
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, off_t(done));
      if (n <= 0) std::abort();
      done += size_t(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

// Errors are one line (srkit's contract for bad input): a message with a
// newline is a finding too.
inline void require_one_line(const char* message) {
  for (const char* p = message; *p; ++p) {
    if (*p == '\n') std::abort();
  }
  if (*message == '\0') std::abort();
}

}  // namespace srkit::fuzz
