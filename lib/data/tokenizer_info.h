// The record sr-prep leaves beside its shards, <dir>/<name>_tokenizer_info.json:
// which tokenizer made the tokens (its files' SHA-256 and the model's
// fingerprint), the vocabulary size and the end-of-text id, so that a trainer
// given a tokenizer can tell whether it is the one the data was made with.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lib/data/tokenizer_files.h"

namespace srkit {

struct TokenizerInfo {
  std::string type = "byte";  // "byte": one token per byte (vocab 256); "bpe"
  int vocab_size = 256;
  int32_t end_of_text = -1;  // -1: no end-of-text token
  std::string fingerprint;   // bpe_fingerprint of the model; empty for "byte"
  std::vector<TokenizerFile> files;

  nlohmann::json to_json() const;
  // Throws std::runtime_error naming `path` if a field is missing or mistyped.
  static TokenizerInfo from_json(const nlohmann::json& j, const std::string& path);
};

TokenizerInfo tokenizer_info_of(const LoadedTokenizer& tokenizer);

// <dir>/<name>_tokenizer_info.json
std::string tokenizer_info_path(const std::string& dir, const std::string& name);

// The record of data named like sr-prep's shards, <dir>/<name>_train_*.bin or
// <dir>/<name>_val_*.bin (a path or a glob); nullopt when the name has no such
// form or no record lies beside it. Throws std::runtime_error naming the record
// if it is unreadable or malformed.
std::optional<TokenizerInfo> find_tokenizer_info(const std::string& data);

}  // namespace srkit
