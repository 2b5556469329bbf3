// A byte-level BPE model (GPT-2's kind): what each token id stands for and the
// merges in rank order, checked for consistency. Built from what tokenizer files
// say (lib/data/tokenizer_files.h); encoded with by lib/data/bpe_tokenizer.h.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace srkit {

constexpr char kDefaultEndOfText[] = "<|endoftext|>";
// Ids at or above this are refused: a corrupt file must not make us allocate
// billions of entries. GPT-2's vocabulary has 50257 tokens, the largest
// common ones a few hundred thousand.
constexpr int64_t kMaxTokenId = (int64_t(1) << 24) - 1;

// What tokenizer files declare, before any check.
struct BpeSpec {
  // Token strings in the byte-level alphabet (lib/data/byte_symbols.h) -> id.
  std::vector<std::pair<std::string, int64_t>> vocab;
  // Added (special) tokens: literal text -> id; the id may also be in vocab
  // with the same text (as GPT-2's <|endoftext|> is).
  std::vector<std::pair<std::string, int64_t>> added;
  // Pairs of vocab strings in rank order (the first merge applies first).
  std::vector<std::pair<std::string, std::string>> merges;
  std::string end_of_text = kDefaultEndOfText;
};

struct BpeMerge {
  int32_t left, right, merged;
};

enum class TokenKind : uint8_t {
  kNone,     // no token has this id (a gap in the numbering)
  kBytes,    // a vocab token: byte symbols
  kSpecial,  // an added token: literal text, never produced by merges
};

struct BpeModel {
  std::vector<std::string> token_bytes;  // by id: what the token decodes to
  std::vector<TokenKind> kind;           // by id
  std::vector<BpeMerge> merges;          // rank order
  int32_t end_of_text = -1;              // id of the end-of-text token
  int32_t byte_token[256] = {};          // id of each single-byte token

  int vocab_size() const { return int(token_bytes.size()); }  // highest id + 1
};

// Checks spec and builds the model. Throws std::invalid_argument saying what
// was expected (one line, without the file name, which the caller knows):
// ids outside [0, kMaxTokenId], an id given to two different tokens, a vocab
// token that is not byte symbols, a byte without its single-symbol token, a
// merge naming an unknown token or whose merged token is not in the vocab, a
// repeated merge, or no end-of-text token.
BpeModel build_bpe_model(const BpeSpec& spec);

// SHA-256 of the model's content (tokens, merges, end-of-text id): the same
// tokenizer read from tokenizer.json or from vocab.json + merges.txt has the
// same fingerprint.
std::string bpe_fingerprint(const BpeModel& model);

}  // namespace srkit
