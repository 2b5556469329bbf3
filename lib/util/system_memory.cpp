#include "lib/util/system_memory.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace srkit {
namespace {

std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Limits at or above this are "unlimited" written as a number (cgroup v1
// reports 2^63 rounded down to a page).
constexpr size_t kUnlimited = size_t(1) << 60;

struct Headroom {
  size_t bytes;
  std::string source;
};

struct CgroupFiles {
  const char* limit;
  const char* usage;
  const char* source;
};

// The cgroup's remaining headroom, 0 when there is no limit.
Headroom cgroup_headroom() {
  constexpr CgroupFiles kVersions[] = {
      {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current",
       "cgroup v2 memory.max - memory.current"},
      {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes",
       "cgroup v1 memory.limit_in_bytes - memory.usage_in_bytes"},
  };
  for (const CgroupFiles& files : kVersions) {
    const size_t limit = cgroup_value_bytes(read_small_file(files.limit));
    if (limit == 0 || limit >= kUnlimited) continue;
    const size_t used = cgroup_value_bytes(read_small_file(files.usage));
    return {limit > used ? limit - used : 1, files.source};
  }
  return {0, ""};
}

}  // namespace

size_t meminfo_available_bytes(const std::string& meminfo_text) {
  std::istringstream in(meminfo_text);
  std::string key, unit;
  size_t value = 0;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return value * 1024;  // the file counts kB
  }
  return 0;
}

size_t cgroup_value_bytes(const std::string& file_text) {
  size_t value = 0;
  const char* begin = file_text.data();
  const auto [end, ec] = std::from_chars(begin, begin + file_text.size(), value);
  if (ec != std::errc() || end == begin) return 0;
  return value;
}

AvailableMemory available_host_memory() {
  AvailableMemory out;
  out.bytes = meminfo_available_bytes(read_small_file("/proc/meminfo"));
  out.source = "MemAvailable in /proc/meminfo";
  const Headroom cgroup = cgroup_headroom();
  if (cgroup.bytes != 0 && (out.bytes == 0 || cgroup.bytes < out.bytes)) {
    out.bytes = cgroup.bytes;
    out.source = cgroup.source;
  }
  return out;
}

}  // namespace srkit
