// A fresh private directory under $TMPDIR (or /tmp), removed with its contents
// on destruction. For tests and tools that need scratch files.
#pragma once

#include <string>

namespace srkit {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "srkit");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name
  std::string file(const std::string& name) const;

 private:
  std::string path_;
};

}  // namespace srkit
