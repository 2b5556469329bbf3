#include "lib/util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

namespace srkit {
namespace {

constexpr const char* kTmpInfix = ".tmp.";
constexpr size_t kTmpDigits = 16;

// errno as text; a full disk, quota or file-size limit all read "no space", so
// a user sees the cause whichever limit was hit.
std::string reason(int err) {
  const std::string text = std::strerror(err);
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) return "no space (" + text + ")";
  return text;
}

std::runtime_error io_error(const std::string& what, const std::string& file, int err) {
  return std::runtime_error(what + " '" + file + "': " + reason(err));
}

// The rename is only durable once the directory entry is on disk.
void fsync_directory_of(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw io_error("cannot open directory", dir.string(), errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw io_error("cannot fsync directory", dir.string(), err);
}

// 16 hex digits no other writer in this or another process is likely to pick;
// O_EXCL makes a collision a retry, never a shared file.
std::string random_suffix() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t process_key = std::random_device{}() ^ (uint64_t(::getpid()) << 32);
  uint64_t x = process_key + 0x9e3779b97f4a7c15ull * ++counter;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;  // splitmix64 finaliser
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  char buf[kTmpDigits + 1];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    tmp_path_ = path_ + kTmpInfix + random_suffix();
    fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ >= 0 || errno != EEXIST) break;
  }
  if (fd_ < 0) throw io_error("cannot create a file beside", path_, errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) abandon();
}

void AtomicFileWriter::abandon() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t nbytes) {
  if (fd_ < 0) throw std::logic_error("AtomicFileWriter: write after commit to '" + path_ + "'");
  const char* p = static_cast<const char*>(data);
  while (nbytes > 0) {
    const ssize_t n = ::write(fd_, p, nbytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw io_error("cannot write", path_, errno);
    }
    p += n;
    nbytes -= size_t(n);
  }
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw std::logic_error("AtomicFileWriter: commit twice to '" + path_ + "'");
  if (::fsync(fd_) != 0) throw io_error("cannot write", path_, errno);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) throw io_error("cannot write", path_, errno);
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    throw io_error("cannot replace", path_, errno);
  committed_ = true;
  fsync_directory_of(path_);
}

void write_file_atomic(const std::string& path, const void* data, size_t nbytes) {
  AtomicFileWriter w(path);
  w.write(data, nbytes);
  w.commit();
}

bool is_atomic_temporary(const std::string& file_name) {
  const size_t at = file_name.rfind(kTmpInfix);
  if (at == std::string::npos || at == 0) return false;
  const std::string digits = file_name.substr(at + std::strlen(kTmpInfix));
  return digits.size() == kTmpDigits &&
         digits.find_first_not_of("0123456789abcdef") == std::string::npos;
}

int remove_atomic_temporaries(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec) && is_atomic_temporary(entry.path().filename().string())) {
      removed += std::filesystem::remove(entry.path(), ec) ? 1 : 0;
    }
  }
  return removed;
}

}  // namespace srkit
