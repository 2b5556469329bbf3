// libFuzzer harness: the llm.c token shard reader on arbitrary file bytes. A bad
// shard must be a one-line std::runtime_error; an accepted one must hold exactly
// (size - 1024) / 2 tokens.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "lib/data/bin_shard.h"
#include "tests/fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static srkit::fuzz::MemoryFile file;
  const std::string& path = file.holding(data, size);
  try {
    const std::vector<uint16_t> tokens = srkit::read_bin_shard(path);
    if (tokens.empty() || srkit::kBinHeaderBytes + 2 * tokens.size() != size) std::abort();
  } catch (const std::runtime_error& e) {
    srkit::fuzz::require_one_line(e.what());
  }
  return 0;
}
