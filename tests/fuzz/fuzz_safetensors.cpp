// libFuzzer harness: SafetensorsReader on arbitrary file bytes. A bad file must
// be a one-line std::runtime_error; a file the reader accepts must give every
// tensor's bytes back. Anything else (a sanitizer report, another exception
// type escaping, a hang) is a finding.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "lib/checkpoint/safetensors.h"
#include "tests/fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static srkit::fuzz::MemoryFile file;
  const std::string& path = file.holding(data, size);
  try {
    const srkit::SafetensorsReader reader(path);
    size_t total = 0;
    for (const std::string& name : reader.names()) {
      const srkit::SafetensorsReader::Info info = reader.info(name);
      std::vector<char> bytes(info.nbytes);
      reader.read(name, bytes.data(), bytes.size());
      total += info.nbytes;
    }
    // Tensors tile the data buffer, so their bytes fit in the file.
    if (total > size) std::abort();
  } catch (const std::runtime_error& e) {
    srkit::fuzz::require_one_line(e.what());
  }
  return 0;
}
