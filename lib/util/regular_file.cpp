#include "lib/util/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "lib/util/format.h"

namespace srkit {
namespace {

// What a file of this mode is, or nullptr for a regular file.
const char* non_regular_kind(mode_t mode) {
  if (S_ISREG(mode)) return nullptr;
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a FIFO";
  if (S_ISSOCK(mode)) return "is a socket";
  if (S_ISCHR(mode)) return "is a character device";
  if (S_ISBLK(mode)) return "is a block device";
  return "is not a regular file";
}

// Why open() failed with `error`. A socket cannot be opened at all (ENXIO), so
// the path's type, where stat() can tell it, names the problem best.
std::string open_failure(const std::string& path, int error) {
  if (error == ENOENT) return "does not exist";
  if (error == EACCES || error == EPERM) return "permission denied";
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (const char* kind = non_regular_kind(st.st_mode)) return kind;
  }
  if (error == ENOTDIR) return "does not exist (a part of the path is not a directory)";
  return std::strerror(error);
}

}  // namespace

RegularFile::RegularFile(const std::string& path, const std::string& what)
    : path_(path), what_(what) {
  const std::string prefix = what_ + " '" + printable(path_) + "': ";
  fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error(prefix + open_failure(path_, errno));
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    const int error = errno;
    ::close(fd_);
    throw std::runtime_error(prefix + "cannot stat: " + std::strerror(error));
  }
  if (const char* kind = non_regular_kind(st.st_mode)) {
    ::close(fd_);
    throw std::runtime_error(prefix + kind + " (expected a regular file)");
  }
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int error = errno;
    ::close(fd_);
    throw std::runtime_error(prefix + "cannot set blocking reads: " + std::strerror(error));
  }
  size_ = uint64_t(st.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

RegularFile::RegularFile(RegularFile&& other) noexcept
    : path_(std::move(other.path_)),
      what_(std::move(other.what_)),
      fd_(std::exchange(other.fd_, -1)),
      size_(other.size_) {}

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    what_ = std::move(other.what_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
  }
  return *this;
}

void RegularFile::read_at(uint64_t offset, void* dst, size_t nbytes,
                          const std::string& part) const {
  char* p = static_cast<char*>(dst);
  size_t done = 0;
  while (done < nbytes) {
    const ssize_t n = ::pread(fd_, p + done, nbytes - done, off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why =
          n == 0 ? "the file ends early (changed or truncated?)" : std::strerror(errno);
      throw std::runtime_error(what_ + " '" + printable(path_) + "': " +
                               strprintf("cannot read %s (%zu bytes at offset %llu): ",
                                         part.c_str(), nbytes, (unsigned long long)offset) +
                               why);
    }
    done += size_t(n);
  }
}

std::string RegularFile::read_all() const {
  std::string bytes(size_t(size_), '\0');
  read_at(0, bytes.data(), bytes.size(), "the file");
  return bytes;
}

}  // namespace srkit
