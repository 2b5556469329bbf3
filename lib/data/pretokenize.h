// GPT-2's pre-tokenizer: text is cut into chunks -- a word with its leading
// space, a number, a run of punctuation, whitespace -- by the regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (leftmost alternative first, as Python's and Rust's regex engines do), and
// BPE merges then work inside one chunk at a time.
//
// \s is Unicode's White_Space property, as in GPT-2's Python `regex` module and
// the Hugging Face tokenizers; \p{L} and \p{N} are general categories from the
// Unicode tables of the system's PCRE2.
//
// Bytes that are not well-formed UTF-8 (lib/data/utf8.h) are not text: each
// such byte is a chunk of its own, and the text around it is split as if the
// byte were the end (before) or the start (after) of the string. GPT-2's
// reference works on decoded strings and cannot take such input at all;
// srkit accepts it so that any file round-trips.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace srkit {

// Walks one text front to back. Not shared between threads (each thread makes
// its own); the compiled regex behind it is shared and built once.
class PretokenSplitter {
 public:
  explicit PretokenSplitter(std::string_view text);
  ~PretokenSplitter();
  PretokenSplitter(const PretokenSplitter&) = delete;
  PretokenSplitter& operator=(const PretokenSplitter&) = delete;

  // The next chunk (a view into the text); false once the text is used up.
  // The chunks, in order, tile the text exactly.
  bool next(std::string_view& chunk);

 private:
  struct MatchData;
  std::string_view text_;
  size_t pos_ = 0;
  size_t valid_end_ = 0;  // end of the well-formed UTF-8 run that pos_ lies in
  std::unique_ptr<MatchData> match_;
};

// All chunks of text, in order.
std::vector<std::string_view> pretokenize(std::string_view text);

}  // namespace srkit
