// libFuzzer harness: parse_checkpoint_metadata on arbitrary metadata. The input
// is "key=value" lines (the string map a safetensors header holds). Bad
// metadata must be a one-line std::runtime_error; accepted metadata must come
// back unchanged through checkpoint_metadata_strings and a second parse.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>

#include "lib/train/checkpoint_metadata.h"
#include "tests/fuzz/harness.h"

namespace {

std::map<std::string, std::string> metadata_from(const std::string& text) {
  std::map<std::string, std::string> meta;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    const size_t eq = line.find('=');
    if (eq != std::string::npos) meta[line.substr(0, eq)] = line.substr(eq + 1);
    begin = end + 1;
  }
  return meta;
}

bool same(const srkit::CheckpointMetadata& a, const srkit::CheckpointMetadata& b) {
  return a.info.step == b.info.step && a.info.data_cursor == b.info.data_cursor &&
         a.info.seed == b.info.seed && a.info.strategy == b.info.strategy &&
         a.info.config == b.info.config && a.info.world_size == b.info.world_size &&
         a.model == b.model && a.optimizer_elements == b.optimizer_elements &&
         a.checksums == b.checksums;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::map<std::string, std::string> meta =
      metadata_from(std::string(reinterpret_cast<const char*>(data), size));
  srkit::CheckpointMetadata parsed;
  try {
    parsed = srkit::parse_checkpoint_metadata(meta, "fuzz.safetensors");
  } catch (const std::runtime_error& e) {
    srkit::fuzz::require_one_line(e.what());
    return 0;
  }
  const srkit::CheckpointMetadata again = srkit::parse_checkpoint_metadata(
      srkit::checkpoint_metadata_strings(parsed), "fuzz.safetensors");
  if (!same(parsed, again)) std::abort();
  return 0;
}
