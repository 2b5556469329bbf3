#include "apps/sr-audit/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace srkit::audit_app {

uint64_t parse_count(const std::string& text, const std::string& flag) {
  const std::string expected =
      flag + ": expected a positive whole number (e.g. 10000000 or 1e7), got '" + text + "'";
  if (text.empty() || text.find_first_not_of("0123456789eE+.") != std::string::npos) {
    throw std::invalid_argument(expected);
  }
  char* end = nullptr;
  if (text.find_first_of("eE.") == std::string::npos) {
    errno = 0;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (*end != '\0' || errno == ERANGE || v == 0) throw std::invalid_argument(expected);
    return v;
  }
  const double v = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !(v >= 1) || v > 0x1p53 || v != std::floor(v)) {
    throw std::invalid_argument(expected);
  }
  return uint64_t(v);
}

}  // namespace srkit::audit_app
