#include "lib/bench/text_file.h"

#include <stdexcept>

#include "lib/util/atomic_file.h"

namespace srkit {

void write_text_file(const std::string& path, const std::string& text, const std::string& flag) {
  try {
    write_file_atomic(path, text.data(), text.size());  // a reader never sees half a table
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(flag + ": " + e.what());
  }
}

}  // namespace srkit
