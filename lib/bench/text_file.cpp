#include "lib/bench/text_file.h"

#include <fstream>
#include <stdexcept>

namespace srkit {

void write_text_file(const std::string& path, const std::string& text, const std::string& flag) {
  std::ofstream f(path);
  if (f) f << text;
  if (f) f.flush();
  if (!f) throw std::runtime_error(flag + ": cannot write " + path);
}

}  // namespace srkit
