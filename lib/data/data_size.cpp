#include "lib/data/data_size.h"

#include <filesystem>
#include <stdexcept>

#include "lib/data/bin_shard.h"
#include "lib/util/glob.h"

namespace srkit {
namespace {

uint64_t file_bytes(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  return ec ? 0 : uint64_t(size);
}

}  // namespace

uint64_t loaded_token_bytes(const std::string& path_or_glob) {
  if (!path_or_glob.ends_with(".bin")) return 2 * file_bytes(path_or_glob);
  uint64_t total = 0;
  try {
    for (const std::string& shard : glob_files(path_or_glob)) {
      const uint64_t bytes = file_bytes(shard);
      total += bytes > kBinHeaderBytes ? bytes - kBinHeaderBytes : 0;
    }
  } catch (const std::runtime_error&) {
    // Nothing matches: the loader reports it, naming the pattern.
  }
  return total;
}

}  // namespace srkit
