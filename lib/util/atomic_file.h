// Crash-safe file replacement: bytes go to PATH.tmp, which is fsync'ed and then
// renamed over PATH, and the directory is fsync'ed so the rename itself is durable.
// A reader therefore sees either the old PATH or the complete new one, never a
// torn file. If the writer is destroyed before commit() (an exception, a failed
// write), PATH.tmp is removed and PATH is untouched.
#pragma once

#include <cstddef>
#include <string>

namespace srkit {

class AtomicFileWriter {
 public:
  // Opens PATH.tmp for writing (truncating a stale one); throws naming the file.
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t nbytes);
  // fsync, close, rename PATH.tmp -> PATH, fsync the directory. Call once.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& tmp_path() const { return tmp_path_; }

 private:
  void abandon() noexcept;

  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// One-shot convenience: the whole content at once.
void write_file_atomic(const std::string& path, const void* data, size_t nbytes);

}  // namespace srkit
