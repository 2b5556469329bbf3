// libFuzzer harness: strategy_from_string on arbitrary text. A bad spec must be
// a one-line std::invalid_argument; an accepted one must be a valid strategy
// (validate() passes, its name parses to the same rule again).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "lib/precision.h"
#include "tests/fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string spec(reinterpret_cast<const char*>(data), size);
  try {
    const srkit::PrecisionStrategy s = srkit::strategy_from_string(spec);
    s.validate();
    if (s.describe().empty() || !(s.bytes_per_param() > 0)) std::abort();
    const srkit::PrecisionStrategy again = srkit::strategy_from_string(s.name);
    if (again.describe() != s.describe() || again.compute != s.compute) std::abort();
  } catch (const std::invalid_argument& e) {
    srkit::fuzz::require_one_line(e.what());
  }
  return 0;
}
