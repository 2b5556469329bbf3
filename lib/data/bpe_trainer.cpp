#include "lib/data/bpe_trainer.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "lib/data/byte_symbols.h"
#include "lib/data/pretokenize.h"

namespace srkit {

namespace {

struct Word {
  std::vector<int32_t> tokens;
  int64_t count;
};

uint64_t pair_key(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }

}  // namespace

BpeSpec train_bpe(std::string_view text, int num_merges) {
  // Token ids during training are the order of creation: bytes 0..255, then merges.
  std::vector<std::string> token_bytes;
  std::unordered_map<std::string, int32_t> id_of_bytes;
  for (int b = 0; b < 256; ++b) {
    token_bytes.push_back(std::string(1, char(b)));
    id_of_bytes.emplace(token_bytes.back(), b);
  }

  std::unordered_map<std::string_view, int64_t> counts;
  for (std::string_view chunk : pretokenize(text)) ++counts[chunk];
  std::vector<Word> words;
  words.reserve(counts.size());
  for (const auto& [chunk, count] : counts) {
    Word w{{}, count};
    for (char c : chunk) w.tokens.push_back(static_cast<unsigned char>(c));
    words.push_back(std::move(w));
  }

  std::vector<std::pair<int32_t, int32_t>> merges;
  std::unordered_map<uint64_t, int64_t> pair_counts;
  for (int m = 0; m < num_merges; ++m) {
    pair_counts.clear();
    for (const Word& w : words) {
      for (size_t i = 0; i + 1 < w.tokens.size(); ++i) {
        pair_counts[pair_key(w.tokens[i], w.tokens[i + 1])] += w.count;
      }
    }
    int64_t best_count = 1;  // a pair seen once is not worth a token
    int32_t best_left = -1, best_right = -1;
    for (const auto& [key, count] : pair_counts) {
      const int32_t l = int32_t(key >> 32), r = int32_t(uint32_t(key));
      const auto bytes = [&](int32_t a, int32_t b) {
        return std::make_pair(std::string_view(token_bytes[a]), std::string_view(token_bytes[b]));
      };
      if (count > best_count ||
          (count == best_count && best_left >= 0 && bytes(l, r) < bytes(best_left, best_right))) {
        best_count = count;
        best_left = l;
        best_right = r;
      }
    }
    if (best_left < 0) break;
    // Two merges may spell the same bytes ("a"+"bc", "ab"+"c"): one token.
    const auto [it, is_new] = id_of_bytes.emplace(token_bytes[best_left] + token_bytes[best_right],
                                                  int32_t(token_bytes.size()));
    if (is_new) token_bytes.push_back(it->first);
    const int32_t merged = it->second;
    merges.emplace_back(best_left, best_right);
    for (Word& w : words) {  // left to right, non-overlapping, as encoding does
      size_t out = 0;
      for (size_t i = 0; i < w.tokens.size(); ++i) {
        if (i + 1 < w.tokens.size() && w.tokens[i] == best_left && w.tokens[i + 1] == best_right) {
          w.tokens[out++] = merged;
          ++i;
        } else {
          w.tokens[out++] = w.tokens[i];
        }
      }
      w.tokens.resize(out);
    }
  }

  // Vocab ids: bytes in GPT-2's order, i.e. by the code point of their symbol.
  std::vector<int> byte_order(256);
  for (int b = 0; b < 256; ++b) byte_order[b] = b;
  std::sort(byte_order.begin(), byte_order.end(), [](int a, int b) {
    return byte_symbol_code_point(uint8_t(a)) < byte_symbol_code_point(uint8_t(b));
  });
  BpeSpec spec;
  for (int id = 0; id < 256; ++id) {
    spec.vocab.emplace_back(byte_symbol(uint8_t(byte_order[id])), id);
  }
  for (size_t id = 256; id < token_bytes.size(); ++id) {
    spec.vocab.emplace_back(bytes_to_symbols(token_bytes[id]), int64_t(id));
  }
  for (const auto& [l, r] : merges) {
    spec.merges.emplace_back(bytes_to_symbols(token_bytes[l]), bytes_to_symbols(token_bytes[r]));
  }
  spec.added.emplace_back(kDefaultEndOfText, int64_t(token_bytes.size()));
  return spec;
}

}  // namespace srkit
