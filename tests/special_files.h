// Paths that are not regular files, for the tests that every reader refuses
// them with one line saying what the path is, at once: a FIFO (with no writer,
// a plain open() or read() of it blocks forever), a directory, /dev/null (a
// character device) and a path that does not exist.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/util/temp_dir.h"

namespace srkit::testing_files {

struct SpecialPath {
  std::string path;
  std::string kind;  // what the reader's message must say
};

class SpecialFiles {
 public:
  SpecialFiles() : dir_("special") {
    if (::mkfifo(fifo().c_str(), 0600) != 0) throw std::runtime_error("mkfifo failed");
    std::filesystem::create_directory(directory());
  }
  std::string fifo() const { return dir_.file("fifo"); }
  std::string directory() const { return dir_.file("dir"); }
  std::string missing() const { return dir_.file("missing"); }
  std::vector<SpecialPath> all() const {
    return {{fifo(), "is a FIFO"},
            {directory(), "is a directory"},
            {"/dev/null", "is a character device"},
            {missing(), "does not exist"}};
  }

 private:
  TempDir dir_;
};

// A reader that blocks on a FIFO must fail the test, not stall the suite: the
// alarm's default action ends the process, which ctest reports as a failure.
class HangGuard {
 public:
  explicit HangGuard(unsigned seconds = 30) { ::alarm(seconds); }
  ~HangGuard() { ::alarm(0); }
  HangGuard(const HangGuard&) = delete;
  HangGuard& operator=(const HangGuard&) = delete;
};

}  // namespace srkit::testing_files
