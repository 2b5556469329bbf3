#include "lib/util/glob.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

namespace srkit {

bool has_glob_chars(const std::string& pattern) {
  return pattern.find_first_of("*?[") != std::string::npos;
}

std::vector<std::string> glob_files(const std::string& pattern) {
  // One named file is the reader's to open: it can say what is wrong with it
  // (missing, a directory, a FIFO) better than "nothing matches".
  if (!has_glob_chars(pattern)) return {pattern};
  std::vector<std::string> out;
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  if (rc == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      // Directories can match a pattern too; only files carry data.
      if (std::filesystem::is_regular_file(g.gl_pathv[i])) out.emplace_back(g.gl_pathv[i]);
    }
  }
  ::globfree(&g);
  if (rc != 0 && rc != GLOB_NOMATCH)
    throw std::runtime_error("cannot expand file pattern '" + pattern + "'");
  if (out.empty()) {
    throw std::runtime_error("no files match '" + pattern + "'");
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace srkit
