#include "lib/util/output_path.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace srkit {
namespace {

namespace fs = std::filesystem;

std::invalid_argument path_error(const std::string& flag, const std::string& path,
                                 const std::string& what) {
  return std::invalid_argument(flag + " " + path + ": " + what);
}

// Whether a file can be created in dir: root ignores permission bits, so only
// an actual creation answers for every user and file system (read-only
// mounts, full quotas).
void check_writable_dir(const std::string& flag, const std::string& shown, const fs::path& dir) {
  const fs::path probe = dir / (".srkit-write-probe-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw path_error(flag, shown,
                     "cannot create files in " + dir.string() + ": " + std::strerror(errno));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

void prepare_output_dir(const std::string& flag, const std::string& dir) {
  // "" is a slip (an unset shell variable), not a request for the working directory.
  if (dir.empty()) throw path_error(flag, "''", "expected a folder name");
  const fs::path p(dir);
  std::error_code ec;
  if (fs::exists(p, ec) && !fs::is_directory(p, ec)) {
    throw path_error(flag, dir, "exists and is not a directory");
  }
  fs::create_directories(p, ec);
  if (ec || !fs::is_directory(p)) {
    throw path_error(flag, dir,
                     "cannot create the directory: " + (ec ? ec.message() : "unknown error"));
  }
  check_writable_dir(flag, dir, p);
}

void check_output_file(const std::string& flag, const std::string& path) {
  if (path.empty()) throw path_error(flag, "''", "expected a file name");
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) throw path_error(flag, path, "is a directory");
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (!fs::is_directory(dir, ec)) {
    throw path_error(flag, path, "directory " + dir.string() + " does not exist");
  }
  check_writable_dir(flag, path, dir);
}

std::string output_file_problem(const std::string& path) {
  try {
    check_output_file("", path);
  } catch (const std::invalid_argument& e) {
    return std::string(e.what()).substr(1);  // without the empty flag's space
  }
  return {};
}

}  // namespace srkit
