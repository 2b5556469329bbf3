// Opening an input file that must be a regular file. Every reader of user-named
// files (checkpoints, token shards, text, run logs) opens through this class, so
// a directory, a FIFO, a device or a socket is refused at once with one line
// saying what the path is, instead of a hang (a FIFO with no writer blocks
// open() and read()) or a misleading "no such file".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace srkit {

class RegularFile {
 public:
  // Opens path read-only without blocking (O_NONBLOCK, so a FIFO cannot hang in
  // open()), checks with fstat() that it is a regular file, then makes reads
  // blocking again. `what` names the kind of file in messages ("token shard").
  // Throws std::runtime_error "<what> '<path>': <why>", where why is "does not
  // exist", "permission denied", "is a directory", "is a FIFO", "is a socket",
  // "is a character device", "is a block device" or the system's error text.
  RegularFile(const std::string& path, const std::string& what);
  ~RegularFile();
  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&& other) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  const std::string& path() const { return path_; }
  // The size fstat() reported at open.
  uint64_t size() const { return size_; }

  // Reads exactly nbytes at offset; throws "<what> '<path>': cannot read
  // <part> ..." when the file ends early (changed or truncated) or read fails.
  void read_at(uint64_t offset, void* dst, size_t nbytes, const std::string& part) const;
  // The whole file, size() bytes.
  std::string read_all() const;

 private:
  std::string path_;
  std::string what_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace srkit
