// Phase timing: one scope marks a phase (forward, backward, optimizer,
// communication...). It opens an NVTX range, so `nsys profile` shows the phases
// in Nsight Systems, and it adds wall time to a per-phase table that CPU runs and
// sr-bench --phases print.
#pragma once

#include <chrono>
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
  const std::map<std::string, Stat>& stats() const { return stats_; }
  double total_seconds() const;
  void reset() { stats_.clear(); }
  // Markdown table: phase | calls | total s | ms/call | share.
  std::string markdown() const;

 private:
  std::map<std::string, Stat> stats_;
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
