// Token streams held in memory, and how they are loaded and split.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace srkit {

// A whole token stream in memory.
struct TokenData {
  std::vector<uint16_t> tokens;
  // 256 for byte-level text; for .bin shards max token + 1 (the model checks
  // against its own vocabulary, which may be larger, e.g. GPT-2's 50257 padded).
  int vocab_size = 0;
  std::string source;  // for messages: path(s), a pattern, or "synthetic"
};

// The file's bytes. Throws naming the file if it cannot be read or is empty.
std::string read_text_file(const std::string& path);

// The file's bytes as tokens 0..255 (vocab 256); UTF-8 is not decoded, so any
// byte sequence is accepted. Throws naming the file if it cannot be read or is empty.
TokenData load_text_file(const std::string& path);

// A path or pattern ending in ".bin" -> load_bin_shards (llm.c shards);
// anything else -> load_text_file.
TokenData load_tokens(const std::string& path_or_glob);

struct DataSplits {
  TokenData train, val;
};

// The last round(n * val_fraction) tokens become val, the rest train; both keep
// the vocabulary of `all`. val_fraction must be in [0, 1) and leave train
// non-empty; val may be empty (e.g. val_fraction 0).
DataSplits split_tail(TokenData all, double val_fraction);

}  // namespace srkit
