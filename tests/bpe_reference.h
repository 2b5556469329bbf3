// A slow, plainly written reference of GPT-2's tokenization for tests, sharing
// no code with lib/data: the pre-tokenizer regex spelled out as a loop over
// characters of known class (an alphabet of "atoms" whose Unicode classes are
// written down here), and BPE as GPT-2's Python loop (merge every occurrence of
// the lowest-ranked pair, left to right, until no pair has a rank).
#pragma once

#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace srkit::bpe_reference {

enum class Class { kLetter, kNumber, kSpace, kOther, kInvalid };

struct Atom {
  std::string bytes;
  Class cls;
};

// Characters with their class (\p{L}, \p{N}, White_Space, anything else), and
// byte strings that are not UTF-8. No atom starts with a continuation byte, so
// concatenated atoms never form characters other than their own.
inline const std::vector<Atom>& alphabet() {
  using C = Class;
  static const std::vector<Atom> atoms = {
      {"a", C::kLetter},
      {"e", C::kLetter},
      {"h", C::kLetter},
      {"i", C::kLetter},
      {"l", C::kLetter},
      {"n", C::kLetter},
      {"o", C::kLetter},
      {"r", C::kLetter},
      {"s", C::kLetter},
      {"t", C::kLetter},
      {"w", C::kLetter},
      {"d", C::kLetter},
      {"m", C::kLetter},
      {"v", C::kLetter},
      {"I", C::kLetter},
      {"S", C::kLetter},
      {"T", C::kLetter},
      {"\xc3\xa9", C::kLetter},      // e acute
      {"\xc3\xbc", C::kLetter},      // u umlaut
      {"\xce\xbb", C::kLetter},      // lambda
      {"\xe4\xb8\xad", C::kLetter},  // CJK
      {"\xe6\x96\x87", C::kLetter},  // CJK
      {"1", C::kNumber},
      {"2", C::kNumber},
      {"3", C::kNumber},
      {"0", C::kNumber},
      {"\xd9\xa3", C::kNumber},  // Arabic-Indic 3
      {"\xc2\xbd", C::kNumber},  // one half (No)
      {" ", C::kSpace},
      {" ", C::kSpace},
      {" ", C::kSpace},
      {" ", C::kSpace},
      {"\t", C::kSpace},
      {"\n", C::kSpace},
      {"\n", C::kSpace},
      {"\r", C::kSpace},
      {"\v", C::kSpace},
      {"\f", C::kSpace},
      {"\xc2\xa0", C::kSpace},      // no-break space
      {"\xe3\x80\x80", C::kSpace},  // ideographic sp.
      {"\xc2\x85", C::kSpace},      // next line
      {"\xe2\x80\xa8", C::kSpace},  // line separator
      {"'", C::kOther},
      {"'", C::kOther},
      {"!", C::kOther},
      {"?", C::kOther},
      {".", C::kOther},
      {",", C::kOther},
      {"-", C::kOther},
      {"<", C::kOther},
      {"|", C::kOther},
      {"\xf0\x9f\x98\x80", C::kOther},      // emoji (So)
      {"\xcc\x81", C::kOther},              // combining (Mn)
      {"\xe1\xa0\x8e", C::kOther},          // U+180E: Cf, not White_Space since Unicode 6.3
      {std::string(1, '\x1c'), C::kOther},  // control (Cc)
      {std::string(1, '\0'), C::kOther},
      {"\xff", C::kInvalid},
      {"\xfe", C::kInvalid},
      {"\xc3", C::kInvalid},          // lead, no tail
      {"\xe4\xb8", C::kInvalid},      // truncated
      {"\xf0\x9f\x98", C::kInvalid},  // truncated
      {"\xed\xa0\x80", C::kInvalid},  // a surrogate
      {"\xc0\xaf", C::kInvalid},      // overlong '/'
  };
  return atoms;
}

// One character, or one byte that is not part of any.
struct Unit {
  std::string bytes;
  Class cls;
};

// A random string of up to max_atoms atoms, as units; text() joins them.
inline std::vector<Unit> random_units(std::mt19937& rng, int max_atoms) {
  const std::vector<Atom>& a = alphabet();
  std::vector<Unit> units;
  const int n = int(rng() % uint32_t(max_atoms + 1));
  for (int i = 0; i < n; ++i) {
    const Atom& atom = a[rng() % a.size()];
    if (atom.cls == Class::kInvalid) {
      for (char c : atom.bytes) units.push_back({std::string(1, c), Class::kInvalid});
    } else {
      units.push_back({atom.bytes, atom.cls});
    }
  }
  return units;
}

inline std::string text(const std::vector<Unit>& units) {
  std::string s;
  for (const Unit& u : units) s += u.bytes;
  return s;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+,
// leftmost alternative first; a byte that is not UTF-8 is a chunk of its own
// and matches nothing (so it ends a run and satisfies (?!\S)).
inline std::vector<std::string> chunks(const std::vector<Unit>& u) {
  std::vector<std::string> out;
  const size_t n = u.size();
  auto emit = [&](size_t from, size_t to) {
    std::string s;
    for (size_t k = from; k < to; ++k) s += u[k].bytes;
    out.push_back(s);
  };
  auto spells = [&](size_t at, const std::string& word) {
    for (size_t k = 0; k < word.size(); ++k) {
      if (at + k >= n || u[at + k].bytes != std::string(1, word[k])) return false;
    }
    return true;
  };
  size_t i = 0;
  while (i < n) {
    if (u[i].cls == Class::kInvalid) {
      emit(i, i + 1);
      ++i;
      continue;
    }
    bool matched = false;
    for (const char* c : {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"}) {
      if (spells(i, c)) {
        emit(i, i + std::string(c).size());
        i += std::string(c).size();
        matched = true;
        break;
      }
    }
    if (matched) continue;
    for (Class cls : {Class::kLetter, Class::kNumber, Class::kOther}) {
      size_t j = i;
      if (u[j].bytes == " " && j + 1 < n && u[j + 1].cls == cls) ++j;
      if (u[j].cls != cls) continue;
      size_t k = j;
      while (k < n && u[k].cls == cls) ++k;
      emit(i, k);
      i = k;
      matched = true;
      break;
    }
    if (matched) continue;
    // u[i] is whitespace
    size_t k = i;
    while (k < n && u[k].cls == Class::kSpace) ++k;
    if (k == n || u[k].cls == Class::kInvalid) {
      emit(i, k);  // \s+(?!\S), to the end of the run
      i = k;
    } else if (k - 1 > i) {
      emit(i, k - 1);  // \s+(?!\S), giving back the space before the non-space
      i = k - 1;
    } else {
      emit(i, k);  // \s+
      i = k;
    }
  }
  return out;
}

// GPT-2's bpe(): word as single bytes; ranks of (left bytes, right bytes).
using Ranks = std::map<std::pair<std::string, std::string>, size_t>;

inline std::vector<std::string> bpe(const std::string& chunk, const Ranks& ranks) {
  std::vector<std::string> word;
  for (char c : chunk) word.push_back(std::string(1, c));
  while (word.size() > 1) {
    size_t best = SIZE_MAX;
    std::pair<std::string, std::string> bigram;
    for (size_t k = 0; k + 1 < word.size(); ++k) {
      const auto it = ranks.find({word[k], word[k + 1]});
      if (it != ranks.end() && it->second < best) {
        best = it->second;
        bigram = it->first;
      }
    }
    if (best == SIZE_MAX) break;
    std::vector<std::string> merged;
    for (size_t k = 0; k < word.size(); ++k) {
      if (k + 1 < word.size() && word[k] == bigram.first && word[k + 1] == bigram.second) {
        merged.push_back(word[k] + word[k + 1]);
        ++k;
      } else {
        merged.push_back(word[k]);
      }
    }
    word = std::move(merged);
  }
  return word;
}

// The whole text's tokens, as the bytes each stands for.
inline std::vector<std::string> tokenize(const std::vector<Unit>& units, const Ranks& ranks) {
  std::vector<std::string> tokens;
  for (const std::string& chunk : chunks(units)) {
    for (std::string& t : bpe(chunk, ranks)) tokens.push_back(std::move(t));
  }
  return tokens;
}

}  // namespace srkit::bpe_reference
