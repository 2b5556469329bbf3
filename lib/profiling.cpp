#include "lib/profiling.h"

#include <cstdio>

#if defined(SRKIT_HAVE_NVTX)
#include <nvtx3/nvToolsExt.h>
#endif

namespace srkit {

void PhaseTimers::add(const std::string& phase, double seconds) {
  Stat& s = stats_[phase];
  s.seconds += seconds;
  s.calls += 1;
}

double PhaseTimers::total_seconds() const {
  double total = 0.0;
  for (const auto& [name, s] : stats_) total += s.seconds;
  return total;
}

std::string PhaseTimers::markdown() const {
  std::string out = "| phase | calls | total s | ms/call | share |\n|---|---:|---:|---:|---:|\n";
  const double total = total_seconds();
  char line[256];
  for (const auto& [name, s] : stats_) {
    std::snprintf(line, sizeof line, "| %s | %ld | %.3f | %.3f | %.1f%% |\n", name.c_str(), s.calls,
                  s.seconds, s.calls ? 1e3 * s.seconds / double(s.calls) : 0.0,
                  total > 0 ? 100.0 * s.seconds / total : 0.0);
    out += line;
  }
  return out;
}

ScopedPhase::ScopedPhase(PhaseTimers* timers, const char* phase)
    : timers_(timers), phase_(phase), start_(std::chrono::steady_clock::now()) {
#if defined(SRKIT_HAVE_NVTX)
  nvtxRangePushA(phase);
#endif
}

ScopedPhase::~ScopedPhase() {
#if defined(SRKIT_HAVE_NVTX)
  nvtxRangePop();
#endif
  if (timers_) {
    timers_->sync();
    const auto end = std::chrono::steady_clock::now();
    timers_->add(phase_, std::chrono::duration<double>(end - start_).count());
  }
}

}  // namespace srkit
