#include "lib/util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace srkit {
namespace {

std::runtime_error io_error(const std::string& what, const std::string& file) {
  return std::runtime_error(what + " '" + file + "': " + std::strerror(errno));
}

// The rename is only durable once the directory entry is on disk.
void fsync_directory_of(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) throw io_error("cannot open directory", dir.string());
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw io_error("cannot fsync directory", dir.string());
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path)
    : path_(std::move(path)), tmp_path_(path_ + ".tmp") {
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw io_error("cannot create", tmp_path_);
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
      throw io_error("cannot write", tmp_path_);
    }
    p += n;
    nbytes -= size_t(n);
  }
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw std::logic_error("AtomicFileWriter: commit twice to '" + path_ + "'");
  if (::fsync(fd_) != 0) throw io_error("cannot fsync", tmp_path_);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) throw io_error("cannot close", tmp_path_);
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) throw io_error("cannot rename onto", path_);
  committed_ = true;
  fsync_directory_of(path_);
}

void write_file_atomic(const std::string& path, const void* data, size_t nbytes) {
  AtomicFileWriter w(path);
  w.write(data, nbytes);
  w.commit();
}

}  // namespace srkit
