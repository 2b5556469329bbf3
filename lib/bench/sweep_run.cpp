#include "lib/bench/sweep_run.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>

#include "lib/util/stop_signal.h"

namespace srkit {
namespace {

using Clock = std::chrono::steady_clock;

std::string duration_text(double seconds) {
  const long s = long(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  }
  return buf;
}

// The child: output to the cell's output.txt, the run, an exit code (0 done,
// 1 failed, 130 stopped by a signal). Never returns.
[[noreturn]] void run_child(const SweepOptions& options, const SweepCell& cell, pid_t parent) {
  // A cell never outlives its sweep: when the parent dies, however it dies
  // (kill -9 included), the kernel kills the cell, so no orphan trains on
  // (and holds the cell's folder) behind a rerun. The parent may have died
  // between fork() and prctl(): then the cell is already an orphan.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  int code = 1;
  try {
    std::filesystem::create_directories(cell.dir);
    const int fd =
        ::open(cell.output_file().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
    }
    code = run_sweep_cell(options, cell) ? 0 : 130;
  } catch (const Interrupted&) {  // stopped before its training loop began
    code = 130;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sr-bench sweep: %s\n", e.what());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(code);  // no atexit handlers or destructors of the parent's objects
}

// The reason a failed cell gave (its output's last line), for the sweep's own
// one-line error: the cause belongs on the sweep's stderr, not only in the file.
std::string last_line_of(const std::string& path) {
  std::ifstream in(path);
  std::string line, last = "no output";
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

std::string cell_name(const SweepCell& c) {
  return c.strategy.name + " lr=" + lr_text(c.lr) + " seed=" + std::to_string(c.seed);
}

}  // namespace

SweepRun run_sweep(const SweepOptions& options, std::FILE* progress) {
  options.validate();
  const std::vector<SweepCell> cells = sweep_cells(options);
  SweepRun run;
  run.cells.resize(cells.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (!read_cell_result(options, cells[i], run.cells[i])) todo.push_back(i);
  }
  const size_t total = cells.size();
  size_t done = total - todo.size();
  if (progress) {
    std::fprintf(progress,
                 "sr-bench sweep: %zu cells (%zu strategies x %zu lrs x %zu seeds), %zu done "
                 "before, %d at a time with %d threads each\n",
                 total, options.strategies.size(), options.lrs.size(), options.seeds.size(), done,
                 options.jobs, options.threads_per_cell());
    std::fflush(progress);
  }
  std::fflush(stdout);
  std::fflush(stderr);  // a child must not inherit unflushed buffers

  const Clock::time_point start = Clock::now();
  const pid_t parent = ::getpid();
  std::map<pid_t, size_t> running;  // child -> cell index
  std::string failure;
  size_t next = 0;
  while (true) {
    while (failure.empty() && stop_signal() == 0 && next < todo.size() &&
           running.size() < size_t(options.jobs)) {
      const size_t index = todo[next++];
      const pid_t pid = ::fork();
      if (pid < 0) {
        failure = std::string("cannot start a cell process: ") + std::strerror(errno);
        break;
      }
      if (pid == 0) run_child(options, cells[index], parent);
      running[pid] = index;
    }
    if (running.empty()) break;
    // Wait for one of this sweep's children (not any child of the process).
    bool reaped = false;
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      const pid_t got = ::waitpid(it->first, &status, WNOHANG);
      if (got == 0 || (got < 0 && errno == EINTR)) {
        ++it;
        continue;
      }
      reaped = true;
      const SweepCell& cell = cells[it->second];
      const int code = got < 0             ? -1
                       : WIFEXITED(status) ? WEXITSTATUS(status)
                                           : 128 + WTERMSIG(status);
      if (code == 0 && read_cell_result(options, cell, run.cells[it->second])) {
        ++done;
        ++run.ran;
        if (progress) {
          const SweepCellResult& r = run.cells[it->second];
          const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
          const double left = elapsed / double(run.ran) * double(total - done);
          std::fprintf(progress, "[%zu/%zu] %s: %s in %.1f s; ETA %s\n", done, total,
                       cell_name(cell).c_str(),
                       r.ok() ? ("val loss " + std::to_string(r.val_loss)).c_str()
                              : ("diverged at step " + std::to_string(r.diverged_step)).c_str(),
                       r.seconds, duration_text(left).c_str());
          std::fflush(progress);
        }
      } else if (code == 130 || stop_signal() != 0) {
        run.interrupted = true;
      } else if (failure.empty()) {
        failure = "cell " + cell_name(cell) + " failed (exit " + std::to_string(code) +
                  "): " + last_line_of(cell.output_file()) + "; see " + cell.output_file();
      }
      it = running.erase(it);
    }
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!failure.empty()) throw std::runtime_error(failure);
  if (stop_signal() != 0 && done < total) run.interrupted = true;
  return run;
}

}  // namespace srkit
