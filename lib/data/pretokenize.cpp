#include "lib/data/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

#include "lib/data/utf8.h"

namespace srkit {

namespace {

// PCRE2 (Debian's libpcre2, maintained) runs GPT-2's regex as written --
// Unicode classes and the lookahead -- and JIT-compiles it (about 100 MB/s on
// one core). RE2 has no lookahead; ICU has the classes, but a hand-written
// split over them would re-implement the regex (alternative order, the
// backtracking of \s+(?!\S)), which is where tokenizers drift. Only \s and \S are
// spelled out: PCRE2's \s also matches U+180E, which Unicode's White_Space
// (the \s of GPT-2's and Hugging Face's engines) has not held since Unicode 6.3.
std::string gpt2_pattern() {
  const std::string ws =
      R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
  return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^)" + ws + R"(\p{L}\p{N}]+|[)" + ws +
         "]+(?![^" + ws + "])|[" + ws + "]+";
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

// Compiled once, shared by every thread (PCRE2 code is read-only when matching).
// Anchored: each match starts where the previous chunk ended, as in findall,
// because every character starts some alternative.
const pcre2_code* pattern() {
  static const pcre2_code* code = [] {
    int error = 0;
    PCRE2_SIZE offset = 0;
    const std::string pattern = gpt2_pattern();
    pcre2_code* c = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_ANCHORED, &error, &offset, nullptr);
    if (!c) throw std::logic_error("pre-tokenizer regex: " + pcre2_message(error));
    pcre2_jit_compile(c, PCRE2_JIT_COMPLETE);  // without JIT support PCRE2 interprets
    return c;
  }();
  return code;
}

}  // namespace

struct PretokenSplitter::MatchData {
  pcre2_match_data* data;
  MatchData() : data(pcre2_match_data_create_from_pattern(pattern(), nullptr)) {
    if (!data) throw std::bad_alloc();
  }
  ~MatchData() { pcre2_match_data_free(data); }
};

PretokenSplitter::PretokenSplitter(std::string_view text)
    : text_(text), match_(std::make_unique<MatchData>()) {}

PretokenSplitter::~PretokenSplitter() = default;

bool PretokenSplitter::next(std::string_view& chunk) {
  if (pos_ >= text_.size()) return false;
  if (pos_ >= valid_end_) {  // the run is used up (or was a single bad byte)
    valid_end_ = pos_ + utf8_valid_prefix(text_.substr(pos_));
    if (valid_end_ == pos_) {  // a byte that is not part of a character
      chunk = text_.substr(pos_++, 1);
      return true;
    }
  }
  // The subject ends where the well-formed run ends: that end acts as the end
  // of the string for the lookahead, and PCRE2 need not check UTF-8 again.
  const std::string_view run = text_.substr(pos_, valid_end_ - pos_);
  const int rc = pcre2_match(pattern(), reinterpret_cast<PCRE2_SPTR>(run.data()), run.size(), 0,
                             PCRE2_NO_UTF_CHECK, match_->data, nullptr);
  if (rc < 0) {
    // Every character starts a match, so this is a resource limit of PCRE2.
    throw std::runtime_error("pre-tokenizer: " + pcre2_message(rc) + " at byte " +
                             std::to_string(pos_));
  }
  const size_t end = pcre2_get_ovector_pointer(match_->data)[1];
  if (end == 0) throw std::logic_error("pre-tokenizer: empty match");  // no alternative is empty
  chunk = run.substr(0, end);
  pos_ += end;
  return true;
}

std::vector<std::string_view> pretokenize(std::string_view text) {
  std::vector<std::string_view> chunks;
  PretokenSplitter splitter(text);
  std::string_view chunk;
  while (splitter.next(chunk)) chunks.push_back(chunk);
  return chunks;
}

}  // namespace srkit
