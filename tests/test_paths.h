// Scratch directories for tests that write files. The process id is part of the
// name so concurrent test runs (ctest -j, several build trees) never share one.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace srkit::testing_paths {

// An empty directory <tmp>/srkit_<suite>_<pid>_<name>, created anew.
inline std::filesystem::path fresh_dir(const std::string& suite, const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("srkit_" + suite + "_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace srkit::testing_paths
