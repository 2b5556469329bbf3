// Reading a byte-level BPE tokenizer from its files: a Hugging Face
// tokenizer.json (model type BPE, ByteLevel pre-tokenizer, as GPT-2's ships),
// or GPT-2's original vocab.json + merges.txt.
#pragma once

#include <string>
#include <vector>

#include "lib/data/bpe_model.h"

namespace srkit {

struct TokenizerFile {
  std::string path;
  std::string sha256;  // of the file's bytes
};

struct LoadedTokenizer {
  BpeModel model;
  std::vector<TokenizerFile> files;
  std::string fingerprint;  // bpe_fingerprint(model)
  std::string source;       // the path(s), for messages
};

// Each loader throws std::runtime_error with one line naming the file and what
// was expected: unreadable or malformed JSON, a model that is not BPE, a
// pre-tokenizer other than GPT-2's ByteLevel, settings that change encoding
// (a normalizer, a subword prefix or suffix, dropout, ignore_merges), and every
// check of build_bpe_model (unknown merge tokens, no end-of-text token, ...).
LoadedTokenizer load_tokenizer_json(const std::string& path);
LoadedTokenizer load_vocab_merges(const std::string& vocab_path, const std::string& merges_path);

// A tokenizer.json, or a vocab.json (an object without "model") with
// merges.txt in the same folder.
LoadedTokenizer load_tokenizer(const std::string& path);

}  // namespace srkit
