#include "lib/util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
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

namespace {

// fsync of a folder's own entry list (its files' renames and links).
void fsync_directory(const std::string& dir) { fsync_directory_of(dir + "/."); }

// A file of the old version the new one does not write: a hard link keeps it
// without copying; across file systems (or where links are refused) a copy.
void carry_over(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::link(from.c_str(), to.c_str()) == 0) return;
  std::error_code ec;
  std::filesystem::copy_file(from, to, ec);
  if (ec) throw std::runtime_error("cannot keep '" + from.string() + "': " + ec.message());
}

}  // namespace

AtomicDirWriter::AtomicDirWriter(std::string dir) : dir_(std::move(dir)) {
  while (!dir_.empty() && dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  const std::filesystem::path p(dir_);
  std::filesystem::path parent = p.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  if (std::filesystem::exists(p, ec) && !std::filesystem::is_directory(p, ec)) {
    throw std::runtime_error("'" + dir_ + "' exists and is not a directory");
  }
  std::filesystem::create_directories(parent, ec);  // as a plain create_directories(DIR) would
  for (int attempt = 0; attempt < 8 && staging_.empty(); ++attempt) {
    const std::string candidate =
        (parent / ("." + p.filename().string() + ".tmp." + random_suffix())).string();
    if (::mkdir(candidate.c_str(), 0755) == 0) {
      staging_ = candidate;
    } else if (errno != EEXIST) {
      throw io_error("cannot create a folder beside", dir_, errno);
    }
  }
  if (staging_.empty())
    throw std::runtime_error("cannot create a staging folder beside '" + dir_ + "'");
}

AtomicDirWriter::~AtomicDirWriter() {
  if (committed_) return;
  std::error_code ec;
  std::filesystem::remove_all(staging_, ec);
}

std::string AtomicDirWriter::file(const std::string& name) const {
  return (std::filesystem::path(staging_) / name).string();
}

void AtomicDirWriter::commit() {
  if (committed_) throw std::logic_error("AtomicDirWriter: commit twice to '" + dir_ + "'");
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool had_old = fs::is_directory(dir_, ec);
  if (had_old) {
    for (const auto& entry : fs::directory_iterator(dir_)) {
      const fs::path to = fs::path(staging_) / entry.path().filename();
      if (fs::exists(fs::symlink_status(to))) continue;  // the new version's file
      if (entry.is_directory(ec) && !entry.is_symlink(ec)) {
        throw std::runtime_error("'" + dir_ + "' holds the folder " + entry.path().string() +
                                 ", which an export does not replace; move it out of the way");
      }
      carry_over(entry.path(), to);
    }
  }
  fsync_directory(staging_);
  if (!had_old) {
    if (::rename(staging_.c_str(), dir_.c_str()) != 0) throw io_error("cannot create", dir_, errno);
  } else if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, dir_.c_str(), RENAME_EXCHANGE) !=
             0) {
    if (errno != EINVAL && errno != ENOSYS) throw io_error("cannot replace", dir_, errno);
    // No atomic exchange here: the old version moves aside, then the new one in.
    const std::string aside = staging_ + ".old";
    if (::rename(dir_.c_str(), aside.c_str()) != 0) throw io_error("cannot replace", dir_, errno);
    if (::rename(staging_.c_str(), dir_.c_str()) != 0) {
      const int err = errno;
      ::rename(aside.c_str(), dir_.c_str());
      throw io_error("cannot replace", dir_, err);
    }
    fs::rename(aside, staging_, ec);  // the old version, removed below
  }
  committed_ = true;
  fsync_directory_of(dir_);
  if (had_old) fs::remove_all(staging_, ec);  // now the old version
}

}  // namespace srkit
