#include "lib/util/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>

namespace srkit {
namespace {

constexpr const char* kLockName = ".srkit.lock";

std::mutex g_mutex;
std::map<std::string, std::weak_ptr<DirLock>>& held_locks() {
  static std::map<std::string, std::weak_ptr<DirLock>> locks;
  return locks;
}

// This process's command line, arguments separated by spaces.
std::string own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : text) c = c == '\0' ? ' ' : c;
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// The holder's description from the lock file ("pid N: command, since time").
std::string holder_of(int fd) {
  char buf[1024];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string text(buf, n > 0 ? size_t(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  for (char& c : text) c = c == '\n' ? ' ' : c;
  return text.empty() ? "a process that has not written its pid yet" : text;
}

void write_holder(int fd) {
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const std::string text =
      "pid " + std::to_string(::getpid()) + " (" + own_command_line() + ") since " + when + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) < 0) {
    // The lock holds without the note; only a rival's message loses detail.
  }
}

}  // namespace

std::shared_ptr<DirLock> DirLock::acquire(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  const std::string canonical = std::filesystem::canonical(dir, ec).string();
  if (ec) throw std::runtime_error(flag + " " + dir + ": cannot lock: " + ec.message());
  std::lock_guard<std::mutex> guard(g_mutex);
  std::shared_ptr<DirLock> held = held_locks()[canonical].lock();
  if (held && held->pid_ == ::getpid()) return held;

  const std::string lock_path = canonical + "/" + kLockName;
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::runtime_error(flag + " " + dir + ": cannot create the lock file " + lock_path +
                             ": " + std::strerror(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = err == EWOULDBLOCK ? holder_of(fd) : std::strerror(err);
    ::close(fd);
    throw std::runtime_error(flag + " " + dir + " is in use by another run (" + holder +
                             "); give this run its own folder, or wait for that one to end");
  }
  write_holder(fd);
  std::shared_ptr<DirLock> lock(new DirLock(canonical, fd, ::getpid()));
  held_locks()[canonical] = lock;
  return lock;
}

std::optional<std::string> DirLock::holder_elsewhere(const std::string& dir) {
  std::error_code ec;
  const std::string canonical = std::filesystem::canonical(dir, ec).string();
  if (ec) return std::nullopt;
  std::lock_guard<std::mutex> guard(g_mutex);
  const std::shared_ptr<DirLock> held = held_locks()[canonical].lock();
  if (held && held->pid_ == ::getpid()) return std::nullopt;
  const std::string lock_path = canonical + "/" + kLockName;
  const int fd = ::open(lock_path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> holder;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) holder = holder_of(fd);
  } else {
    ::flock(fd, LOCK_UN);
  }
  ::close(fd);
  return holder;
}

bool file_locked_elsewhere(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool locked = false;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
      locked = errno == EWOULDBLOCK;
    } else {
      ::flock(fd, LOCK_UN);
    }
  }
  ::close(fd);
  return locked;
}

DirLock::~DirLock() {
  // Closing the descriptor releases the flock.
  ::close(fd_);
}

}  // namespace srkit
