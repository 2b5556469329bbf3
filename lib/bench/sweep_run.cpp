#include "lib/bench/sweep_run.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <thread>

#include "lib/bench/sweep_child.h"
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

std::string cell_name(const SweepCell& c) {
  return c.strategy.name + " lr=" + lr_text(c.lr) + " seed=" + std::to_string(c.seed);
}

}  // namespace

SweepRun run_sweep(const SweepOptions& options, std::FILE* progress) {
  options.validate();
  const std::vector<SweepCell> cells = sweep_cells(options);
  SweepRun run;
  run.cells.resize(cells.size());
  std::vector<bool> have(cells.size(), false);
  for (size_t i = 0; i < cells.size(); ++i)
    have[i] = read_cell_result(options, cells[i], run.cells[i]);
  run.carry.done_before = int(std::count(have.begin(), have.end(), true));
  const size_t total = cells.size();
  std::fflush(stdout);
  std::fflush(stderr);  // a child must not inherit unflushed buffers
  // The environment every result of this call records, and the key of the
  // cells other folders may give (lib/bench/sweep_carry.h): probed only when
  // some cell is still missing.
  SweepOptions with_env = options;
  if (run.carry.done_before < int(total)) {
    with_env.environment = probe_environment(options);
    carry_cells(with_env, cells, with_env.environment, run.cells, have, run.carry);
  }
  std::vector<size_t> todo;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (!have[i]) todo.push_back(i);
  }
  size_t done = total - todo.size();
  if (progress) {
    std::fprintf(progress,
                 "sr-bench sweep: %zu cells (%zu strategies x %zu lrs x %zu seeds), %d done "
                 "before, %zu carried from other folders, %d at a time with %d threads each\n",
                 total, options.strategies.size(), options.lrs.size(), options.seeds.size(),
                 run.carry.done_before, run.carry.carried.size(), options.jobs,
                 options.threads_per_cell());
    for (const std::string& why : run.carry.excluded)
      std::fprintf(progress, "  not carried: %s\n", why.c_str());
    std::fflush(progress);
  }

  const Clock::time_point start = Clock::now();
  std::map<pid_t, size_t> running;  // child -> cell index
  std::string failure;
  size_t next = 0;
  while (true) {
    while (failure.empty() && stop_signal() == 0 && next < todo.size() &&
           running.size() < size_t(options.jobs)) {
      const size_t index = todo[next++];
      const SweepCell& cell = cells[index];
      pid_t pid = -1;
      try {
        // Exit codes: 0 done, 1 failed, 130 stopped by a signal.
        pid = start_child(cell.dir, cell.output_file(),
                          [&] { return run_sweep_cell(with_env, cell) ? 0 : 130; });
      } catch (const std::runtime_error& e) {
        failure = e.what();
        break;
      }
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
        ++run.carry.run_here;
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
