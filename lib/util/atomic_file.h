// Crash-safe file replacement: bytes go to a temporary file beside PATH, which is
// fsync'ed and then renamed over PATH, and the directory is fsync'ed so the rename
// itself is durable. A reader therefore sees either the old PATH or the complete
// new one, never a torn file. If the writer is destroyed before commit() (an
// exception, a failed write), the temporary is removed and PATH is untouched.
//
// The temporary is PATH.tmp.<16 hex digits>, created exclusively (O_CREAT |
// O_EXCL | O_NOFOLLOW): a file or symlink planted at any fixed name is never
// opened, followed or overwritten, and two writers never share a temporary.
#pragma once

#include <cstddef>
#include <string>

namespace srkit {

class AtomicFileWriter {
 public:
  // Creates the temporary for PATH; throws naming PATH and the reason.
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Throws on a failed write; a full disk or file-size limit says "no space".
  void write(const void* data, size_t nbytes);
  // fsync, close, rename the temporary onto PATH, fsync the directory. Call once.
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

// Whether a file name is one of AtomicFileWriter's temporaries.
bool is_atomic_temporary(const std::string& file_name);

// Removes the temporaries a killed writer left in dir (only names of exactly the
// form above). Call only while owning the directory (lib/util/dir_lock.h), so no
// live writer's temporary is removed. Returns how many were removed.
int remove_atomic_temporaries(const std::string& dir);

}  // namespace srkit
