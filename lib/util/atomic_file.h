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

// Crash-safe replacement of a whole folder of files (sr-export's config.json
// beside model.safetensors): the new files are written into a staging folder
// beside DIR (.NAME.tmp.<16 hex digits>, created exclusively), and commit()
// swaps it in with one rename, so a reader of DIR sees either the old set of
// files or the complete new one, never new weights beside an old or missing
// config. Files of the old DIR that the new version does not write (a
// tokenizer put there by hand) are carried over as hard links (copies where
// links are impossible); a sub-folder of DIR is refused. If the writer is
// destroyed before commit(), the staging folder is removed and DIR is untouched.
// A writer killed mid-way leaves its staging folder, which may be deleted.
class AtomicDirWriter {
 public:
  // Creates the staging folder (and DIR's parents if missing); throws naming DIR.
  explicit AtomicDirWriter(std::string dir);
  ~AtomicDirWriter();
  AtomicDirWriter(const AtomicDirWriter&) = delete;
  AtomicDirWriter& operator=(const AtomicDirWriter&) = delete;

  // Where to write file `name` of the new version.
  std::string file(const std::string& name) const;
  // Carries the old files over, fsyncs, swaps the staging folder in (renameat2
  // RENAME_EXCHANGE where the file system has it; else DIR is moved aside
  // first, so for that instant a reader finds no DIR, still never a mix), and
  // removes the old version. Call once.
  void commit();

 private:
  std::string dir_;
  std::string staging_;
  bool committed_ = false;
};

}  // namespace srkit
