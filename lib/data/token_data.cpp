#include "lib/data/token_data.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "lib/data/bin_shard.h"
#include "lib/util/format.h"
#include "lib/util/regular_file.h"
#include "lib/util/stop_signal.h"

namespace srkit {

std::string read_text_file(const std::string& path) {
  std::string bytes = RegularFile(path, "text file").read_all();
  if (bytes.empty()) throw std::runtime_error("text file '" + path + "' is empty");
  return bytes;
}

// Byte tokens straight from the file, a chunk at a time: the text is never held
// whole beside its tokens (2 bytes of memory per byte of text, not 3), and a
// stop signal ends a long read between chunks.
TokenData load_text_file(const std::string& path) {
  const RegularFile file(path, "text file");
  if (file.size() == 0) throw std::runtime_error("text file '" + path + "' is empty");
  TokenData out;
  out.tokens.resize(file.size());
  std::vector<unsigned char> chunk(std::min<uint64_t>(file.size(), uint64_t(16) << 20));
  for (uint64_t at = 0; at < file.size(); at += chunk.size()) {
    throw_if_stopped("loading the data");
    const size_t n = size_t(std::min<uint64_t>(chunk.size(), file.size() - at));
    file.read_at(at, chunk.data(), n, "its text");
    std::copy(chunk.begin(), chunk.begin() + std::ptrdiff_t(n),
              out.tokens.begin() + std::ptrdiff_t(at));
  }
  out.vocab_size = 256;
  out.source = path;
  return out;
}

TokenData load_tokens(const std::string& path_or_glob) {
  if (path_or_glob.ends_with(".bin")) return load_bin_shards(path_or_glob);
  return load_text_file(path_or_glob);
}

DataSplits split_tail(TokenData all, double val_fraction) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0))
    throw std::invalid_argument(strprintf("val fraction %g is outside [0, 1)", val_fraction));
  const size_t n = all.tokens.size();
  const size_t n_val = size_t(std::llround(double(n) * val_fraction));
  if (n_val >= n) {
    throw std::invalid_argument(
        strprintf("splitting %zu tokens of '%s' with val fraction %g leaves no "
                  "training tokens",
                  n, all.source.c_str(), val_fraction));
  }
  DataSplits out;
  out.val.tokens.assign(all.tokens.end() - std::ptrdiff_t(n_val), all.tokens.end());
  out.val.vocab_size = all.vocab_size;
  out.val.source = all.source + " (val split)";
  all.tokens.resize(n - n_val);
  out.train.tokens = std::move(all.tokens);
  out.train.vocab_size = all.vocab_size;
  out.train.source = all.source + " (train split)";
  return out;
}

}  // namespace srkit
