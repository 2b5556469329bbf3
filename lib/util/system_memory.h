// How much memory a run may still allocate, asked before it allocates: the
// kernel's estimate of available host memory, capped by the cgroup's limit
// (containers and batch jobs), whose OOM killer would otherwise end the run with
// exit 137 and no message.
#pragma once

#include <cstddef>
#include <string>

namespace srkit {

struct AvailableMemory {
  size_t bytes = 0;    // 0: unknown (then nothing is refused)
  std::string source;  // where the figure comes from, for messages
};

// MemAvailable of /proc/meminfo, or the cgroup v2 (memory.max - memory.current)
// or v1 (limit_in_bytes - usage_in_bytes) headroom when that is smaller.
AvailableMemory available_host_memory();

// Parsers of the files above, separate for testing: a meminfo text's
// MemAvailable in bytes (0 if absent), and a cgroup limit file's value (0 for
// "max" or anything that is not a number).
size_t meminfo_available_bytes(const std::string& meminfo_text);
size_t cgroup_value_bytes(const std::string& file_text);

}  // namespace srkit
