// Runs a shell command as a user would, for the tests of the command-line
// tools: its exit code (128 + N when killed by signal N) and what it printed,
// either stdout and stderr together (run_command) or apart (run_command_split).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace srkit::testing_process {

struct CommandResult {
  int code;
  std::string output;
};

struct SplitResult {
  int code;
  std::string out, err;
};

namespace detail {

// popen's stdout and the exit code (128 + N when killed by signal N).
inline CommandResult read_pipe(const std::string& shell_command) {
  FILE* pipe = popen(shell_command.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + shell_command);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

}  // namespace detail

inline CommandResult run_command(const std::string& command) {
  return detail::read_pipe(command + " 2>&1");
}

// stderr goes through a file of its own (unique per process and call), read
// and removed after the command ends.
inline SplitResult run_command_split(const std::string& command) {
  static std::atomic<unsigned> calls{0};
  const std::filesystem::path err_file =
      std::filesystem::temp_directory_path() /
      ("srkit_test_stderr_" + std::to_string(getpid()) + "_" + std::to_string(calls++) + ".txt");
  const CommandResult r = detail::read_pipe(command + " 2>" + err_file.string());
  std::ifstream f(err_file);
  std::string err((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  f.close();
  std::filesystem::remove(err_file);
  return {r.code, r.output, err};
}

}  // namespace srkit::testing_process
