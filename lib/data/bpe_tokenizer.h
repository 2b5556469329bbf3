// Byte-level BPE encoding and decoding (GPT-2's scheme): text is cut into
// chunks by the pre-tokenizer (lib/data/pretokenize.h), each chunk starts as
// one token per byte, and merges apply in rank order inside the chunk.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lib/data/bpe_model.h"

namespace srkit {

class BpeTokenizer {
 public:
  explicit BpeTokenizer(BpeModel model);

  // Appends the tokens of text. Special tokens are not recognised in the text
  // ("<|endoftext|>" in a document is encoded as ordinary characters, as
  // llm.c's data preparation does); the caller places end-of-text tokens.
  // Any bytes are accepted, including ones that are not UTF-8.
  void encode(std::string_view text, std::vector<int32_t>& out);
  std::vector<int32_t> encode(std::string_view text);

  // The bytes the tokens stand for: decode(encode(s)) == s for any s. Throws
  // std::out_of_range naming an id that has no token.
  std::string decode(std::span<const int32_t> ids) const;

  bool has_token(int32_t id) const {
    return id >= 0 && id < vocab_size() && model_.kind[id] != TokenKind::kNone;
  }
  const std::string& token_bytes(int32_t id) const { return model_.token_bytes[id]; }
  int vocab_size() const { return model_.vocab_size(); }
  int32_t end_of_text() const { return model_.end_of_text; }
  const BpeModel& model() const { return model_; }

 private:
  struct Symbol {
    int32_t id;          // -1 once merged into its left neighbour
    int32_t prev, next;  // neighbours still alive; -1 at the ends
  };
  struct Candidate {  // an adjacent pair that a merge applies to
    uint32_t rank;
    int32_t pos;          // the left symbol
    int32_t left, right;  // the ids when it was found: stale if they changed
  };
  struct MergeRule {
    uint32_t rank;
    int32_t merged;
  };
  struct ViewHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  void encode_chunk(std::string_view chunk, std::vector<int32_t>& out);
  void apply_merges(std::string_view chunk, std::vector<int32_t>& out);
  void push_candidate(int32_t pos);

  BpeModel model_;
  std::unordered_map<uint64_t, MergeRule> rule_;  // (left << 32 | right) -> rule
  // Chunks seen before -> their tokens (offset and count in cached_ids_):
  // text repeats its words, so most chunks are looked up, not merged.
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, ViewHash, std::equal_to<>> cache_;
  std::vector<int32_t> cached_ids_;
  // Scratch of apply_merges, kept to avoid allocating per chunk.
  std::vector<Symbol> symbols_;
  std::vector<Candidate> heap_;
  std::vector<int32_t> merged_at_;
};

}  // namespace srkit
