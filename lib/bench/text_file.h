// Writing sr-bench's --csv / --json outputs.
#pragma once

#include <string>

namespace srkit {

// Writes text to path (replacing it); throws std::runtime_error naming `flag`
// and the path when the file cannot be written.
void write_text_file(const std::string& path, const std::string& text, const std::string& flag);

}  // namespace srkit
