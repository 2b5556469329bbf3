// Runs a shell command as a user would, for the tests of the command-line
// tools: its exit code (128 + N when killed by signal N) and its stdout and
// stderr together.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace srkit::testing_process {

struct CommandResult {
  int code;
  std::string output;
};

inline CommandResult run_command(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

}  // namespace srkit::testing_process
