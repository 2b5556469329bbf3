// sr-prep's input side: files -> documents -> one token stream.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/data/bpe_tokenizer.h"

namespace srkit {

struct TokenizedInputs {
  std::vector<uint16_t> tokens;
  size_t bytes = 0;      // input bytes read
  size_t documents = 0;  // documents encoded
};

// Without a tokenizer: every file's bytes are its tokens (vocab 256), files
// concatenated. With one: each file is a document, or with a separator each
// non-empty piece of a file between separators is; every document is encoded
// after an end-of-text token, as llm.c's data preparation does, so the token
// before each document marks its start. The tokenizer's ids must fit uint16.
// Throws std::runtime_error naming a file that cannot be read or is empty.
TokenizedInputs tokenize_inputs(const std::vector<std::string>& paths, BpeTokenizer* tokenizer,
                                const std::string& doc_separator);

}  // namespace srkit
