// Phase timing: one scope marks a phase (forward, backward, optimizer,
// communication...). It opens an NVTX range, so `nsys profile` shows the phases
// in Nsight Systems, and it adds wall time to a per-phase table that CPU runs and
// sr-bench --phases print. On an asynchronous device the table measures the
// device only when the timers synchronise at each phase end (set_sync).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>

namespace srkit {

class PhaseTimers {
 public:
  struct Stat {
    double seconds = 0.0;
    long calls = 0;
  };
  void add(const std::string& phase, double seconds);
  // Called at the end of every phase before its time is taken: a device
  // backend's synchronize, so that a phase's time is the device's time for its
  // work rather than the host's time to queue it (unset: host time).
  void set_sync(std::function<void()> sync) { sync_ = std::move(sync); }
  void sync() const {
    if (sync_) sync_();
  }
  const std::map<std::string, Stat>& stats() const { return stats_; }
  double total_seconds() const;
  void reset() { stats_.clear(); }
  // Markdown table: phase | calls | total s | ms/call | share.
  std::string markdown() const;

 private:
  std::map<std::string, Stat> stats_;
  std::function<void()> sync_;
};

// RAII: NVTX push/pop plus timing into `timers` (may be null: NVTX only).
class ScopedPhase {
 public:
  ScopedPhase(PhaseTimers* timers, const char* phase);
  ~ScopedPhase();
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  PhaseTimers* timers_;
  const char* phase_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace srkit
