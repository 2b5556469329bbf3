#include "lib/train/memory_check.h"

#include <cstdio>
#include <stdexcept>

namespace srkit {

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double x = double(bytes);
  int u = 0;
  while (x >= 1024.0 && u < 4) {
    x /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", x, units[u]);
  }
  return buf;
}

void require_memory(const std::string& what, uint64_t need, const std::string& breakdown,
                    const AvailableMemory& have, const std::string& advice) {
  if (have.bytes == 0 || need <= have.bytes) return;
  throw std::invalid_argument("not enough memory for " + what + ": needs " + human_bytes(need) +
                              (breakdown.empty() ? "" : " (" + breakdown + ")") + " but " +
                              human_bytes(have.bytes) + " is available (" + have.source + "); " +
                              advice);
}

MemoryEstimate run_memory_estimate(const TrainConfig& c, int world) {
  MemoryScenario s;
  s.model = c.model_config();
  s.strategy = c.strategy;
  s.world = world;
  s.zero = c.zero;
  s.batch = c.batch;
  s.seq_len = c.seq_len;
  s.device = c.device;
  s.threads = c.threads;
  s.recompute = c.recompute == "layer";
  s.grad_accum = c.grad_accum;
  return estimate_memory(s);
}

uint64_t checkpoint_staging_bytes(const MemoryEstimate& e, int world, int zero) {
  // Under ZeRO-1 each rank holds a shard, but the lead gathers all of them.
  const uint64_t shards = zero == 0 ? 1 : uint64_t(world);
  return uint64_t(e.weights) + shards * (uint64_t(e.master) + e.moments + e.kahan);
}

std::string describe_estimate(const MemoryEstimate& e) {
  std::string out;
  auto add = [&out](const char* name, uint64_t bytes) {
    if (bytes == 0) return;
    out += (out.empty() ? "" : ", ") + std::string(name) + " " + human_bytes(bytes);
  };
  add("weights", e.weights);
  add("master", e.master);
  add("grads", e.grads);
  add("optimizer state", uint64_t(e.moments) + e.kahan);
  add("activations", e.activations);
  add("scratch", uint64_t(e.scratch) + e.step_record + e.compute_copies);
  add("communication", e.comm);
  return out;
}

}  // namespace srkit
