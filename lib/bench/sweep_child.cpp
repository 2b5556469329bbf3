#include "lib/bench/sweep_child.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "lib/util/stop_signal.h"

namespace srkit {

pid_t start_child(const std::string& dir, const std::string& output_file,
                  const std::function<int()>& body) {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error(std::string("cannot start a process: ") + std::strerror(errno));
  if (pid > 0) return pid;
  // The child. The parent may have died between fork() and prctl(): then it
  // is an orphan already and stops at once.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  int code = 1;
  try {
    std::filesystem::create_directories(dir);
    const int fd = ::open(output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
    }
    code = body();
  } catch (const Interrupted&) {  // stopped before its training loop began
    code = 130;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sr-bench sweep: %s\n", e.what());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(code);  // no atexit handlers or destructors of the parent's objects
}

std::string last_line_of(const std::string& path) {
  std::ifstream in(path);
  std::string line, last = "no output";
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

}  // namespace srkit
