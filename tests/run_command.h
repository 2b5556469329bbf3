// Runs a shell command as a user would, for the tests of the command-line
// tools: its exit code (128 + N when killed by signal N) and what it printed,
// either stdout and stderr together (run_command) or apart (run_command_split);
// and, for tests that act on a live run, the same in the background and shell
// fragments that wait for the run to get far enough.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>

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

// Starts a shell command in the background (its own process, output
// discarded) and returns its pid, for tests that act on a live run.
inline pid_t spawn_command(const std::string& command) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string cmd = "exec " + command + " >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Waits for a spawned command: its exit code, 128 + N when killed by signal N.
inline int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Polls until the file exists and holds `needle` (a run has got that far).
inline bool wait_for_text(const std::filesystem::path& file, const std::string& needle,
                          double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    std::ifstream in(file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Shell fragments for a test that acts on a live run (a signal, a kill) from
// the shell that runs it: wait until `condition` (a shell test) holds, polling
// every 0.2 s for at most 60 s, then one second more, so the run is past what
// the test is about (a logged step, a complete checkpoint). A fixed delay
// instead can come before that on a slow machine (a sanitized build on two
// busy cores). `condition` must hold no single quotes (callers wrap commands
// in sh -c '...').
inline std::string shell_wait_until(const std::string& condition) {
  return "i=0; while ! " + condition +
         " && [ $i -lt 300 ]; do sleep 0.2; i=$((i+1)); done; sleep 1";
}

// The run log holds a step record ({"type":"step",...}; the pattern type.:.step
// matches it without quotes of its own).
inline std::string shell_log_has_step(const std::filesystem::path& log) {
  return "grep -q type.:.step \"" + log.string() + "\" 2>/dev/null";
}

// The checkpoint folder holds a complete checkpoint (one at its final name).
inline std::string shell_checkpoint_exists(const std::filesystem::path& ckpt_dir) {
  return "ls \"" + ckpt_dir.string() + "\"/ckpt_*.safetensors >/dev/null 2>&1";
}

}  // namespace srkit::testing_process
