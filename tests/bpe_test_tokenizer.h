// A small byte-level BPE tokenizer that tests write to disk themselves: the 256
// byte symbols numbered in GPT-2's order, a handful of merges chosen to cover
// words, contractions, whitespace, digits, punctuation and multi-byte
// characters, and <|endoftext|> last. The byte alphabet is computed here the
// way GPT-2's bytes_to_unicode() does, independently of lib/data/byte_symbols.
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace srkit::bpe_test {

// GPT-2's bytes_to_unicode(): printable bytes keep their code point, the others
// get 256, 257, ... in byte order.
inline std::vector<char32_t> gpt2_byte_code_points() {
  std::vector<int> kept;
  for (int b = '!'; b <= '~'; ++b) kept.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) kept.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) kept.push_back(b);
  std::vector<char32_t> cp(256);
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = std::find(kept.begin(), kept.end(), b) != kept.end();
    cp[b] = printable ? char32_t(b) : char32_t(256 + n++);
  }
  return cp;
}

inline std::string encode_utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += char(c);
  } else if (c < 0x800) {
    s += char(0xC0 | (c >> 6));
    s += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += char(0xE0 | (c >> 12));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  } else {
    s += char(0xF0 | (c >> 18));
    s += char(0x80 | ((c >> 12) & 0x3F));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  }
  return s;
}

// Raw bytes -> the token string written in vocab and merges files.
inline std::string symbols(const std::string& bytes) {
  static const std::vector<char32_t> cp = gpt2_byte_code_points();
  std::string out;
  for (char c : bytes) out += encode_utf8(cp[static_cast<unsigned char>(c)]);
  return out;
}

// A token string from a vocab or merges file -> the raw bytes (every symbol
// is below U+0800, so one or two UTF-8 bytes).
inline std::string bytes_of_symbols(const std::string& written) {
  static const std::map<std::string, char> byte_of = [] {
    std::map<std::string, char> m;
    const std::vector<char32_t> cp = gpt2_byte_code_points();
    for (int b = 0; b < 256; ++b) m[encode_utf8(cp[b])] = char(b);
    return m;
  }();
  std::string out;
  for (size_t i = 0; i < written.size();) {
    const size_t n = static_cast<unsigned char>(written[i]) < 0x80 ? 1 : 2;
    out += byte_of.at(written.substr(i, n));
    i += n;
  }
  return out;
}

// The merges in rank order, as raw bytes.
inline const std::vector<std::pair<std::string, std::string>>& merges() {
  static const std::vector<std::pair<std::string, std::string>> m = {
      {" ", "t"},            // 1
      {"h", "e"},            // 2
      {" t", "he"},          // 3
      {"i", "n"},            // 4
      {"in", "g"},           // 5
      {" ", "a"},            // 6
      {"'", "s"},            // 7
      {"e", "r"},            // 8
      {" ", " "},            // 9
      {"  ", "  "},          // 10
      {"1", "2"},            // 11
      {"12", "3"},           // 12
      {"\xc3", "\xa9"},      // 13  e acute
      {"\xc3", "\xbc"},      // 14  u umlaut
      {"a", "a"},            // 15
      {"\n", "\n"},          // 16
      {"t", "h"},            // 17
      {"o", "r"},            // 18
      {" ", "w"},            // 19
      {" w", "or"},          // 20
      {"l", "d"},            // 21
      {" wor", "ld"},        // 22
      {"'", "t"},            // 23
      {"r", "e"},            // 24
      {"'", "re"},           // 25
      {"\xe4", "\xb8"},      // 26  first two bytes of U+4E2D
      {"\xe4\xb8", "\xad"},  // 27  U+4E2D
      {"\xf0", "\x9f"},      // 28  first two bytes of most emoji
      {"\xff", "\xfe"},      // 29  never applies: both bytes are never UTF-8
      {"!", "!"},            // 30
      {" ", "!!"},           // 31
  };
  return m;
}

// Raw bytes of each token -> id: bytes by symbol code point (GPT-2's order),
// then one token per merge, then <|endoftext|>.
inline const std::map<std::string, int32_t>& ids() {
  static const std::map<std::string, int32_t> table = [] {
    const std::vector<char32_t> cp = gpt2_byte_code_points();
    std::vector<int> order(256);
    for (int b = 0; b < 256; ++b) order[b] = b;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return cp[a] < cp[b]; });
    std::map<std::string, int32_t> t;
    for (int id = 0; id < 256; ++id) t[std::string(1, char(order[id]))] = id;
    for (const auto& [l, r] : merges()) t.emplace(l + r, int32_t(t.size()));
    return t;
  }();
  return table;
}

inline constexpr int32_t kEndOfText = 256 + 31;
inline constexpr int kVocabSize = kEndOfText + 1;

inline int32_t id(const std::string& bytes) { return ids().at(bytes); }

inline std::vector<int32_t> ids_of(const std::vector<std::string>& tokens) {
  std::vector<int32_t> out;
  for (const std::string& t : tokens) out.push_back(id(t));
  return out;
}

inline nlohmann::json vocab_json() {
  nlohmann::json v = nlohmann::json::object();
  for (const auto& [bytes, i] : ids()) v[symbols(bytes)] = i;
  return v;
}

// A tokenizer.json as Hugging Face writes GPT-2's; merges as "a b" strings or,
// as newer files do, as ["a", "b"] arrays.
inline nlohmann::json tokenizer_json(bool array_merges = false) {
  nlohmann::json merges_json = nlohmann::json::array();
  for (const auto& [l, r] : merges()) {
    if (array_merges) {
      merges_json.push_back({symbols(l), symbols(r)});
    } else {
      merges_json.push_back(symbols(l) + " " + symbols(r));
    }
  }
  nlohmann::json vocab = vocab_json();
  vocab["<|endoftext|>"] = kEndOfText;
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {{{"id", kEndOfText},
         {"content", "<|endoftext|>"},
         {"single_word", false},
         {"lstrip", false},
         {"rstrip", false},
         {"normalized", true},
         {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"vocab", vocab},
        {"merges", merges_json}}},
  };
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline void write_tokenizer_json(const std::string& path, bool array_merges = false) {
  write_text(path, tokenizer_json(array_merges).dump(2));
}

// GPT-2's original pair: vocab.json (with <|endoftext|>) and merges.txt.
inline void write_vocab_merges(const std::string& vocab_path, const std::string& merges_path) {
  nlohmann::json vocab = vocab_json();
  vocab["<|endoftext|>"] = kEndOfText;
  write_text(vocab_path, vocab.dump());
  std::string text = "#version: 0.2\n";
  for (const auto& [l, r] : merges()) text += symbols(l) + " " + symbols(r) + "\n";
  write_text(merges_path, text);
}

}  // namespace srkit::bpe_test
