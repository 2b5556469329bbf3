#include "lib/bench/process_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace srkit {

size_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream fields(line.substr(6));
      size_t kib = 0;
      fields >> kib;  // "VmHWM:     12345 kB"
      return kib * 1024;
    }
  }
  return 0;
}

bool reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  if (!clear) return false;
  clear << "5";
  clear.flush();
  return bool(clear);
}

}  // namespace srkit
