#include "lib/data/synthetic.h"

#include <array>
#include <string>
#include <string_view>

#include "lib/data/data_rng.h"

namespace srkit {
namespace {

constexpr std::array<std::string_view, 12> kNouns = {"fox",   "dog",   "cat",   "bird",
                                                     "king",  "queen", "child", "farmer",
                                                     "horse", "river", "tree",  "ship"};
constexpr std::array<std::string_view, 10> kAdjectives = {
    "red", "small", "old", "quick", "lazy", "bright", "quiet", "brave", "green", "tall"};
constexpr std::array<std::string_view, 10> kVerbs = {
    "sees", "follows", "likes", "finds", "helps", "watches", "calls", "meets", "hears", "carries"};
constexpr std::array<std::string_view, 6> kPlaces = {"near the river",   "in the forest",
                                                     "by the sea",       "at the old mill",
                                                     "under the bridge", "on the hill"};
constexpr std::array<std::string_view, 6> kPhrases = {
    "to be or not to be, that is the question.",
    "the quick brown fox jumps over the lazy dog.",
    "all that glitters is not gold.",
    "a journey of a thousand miles begins with a single step.",
    "once upon a time there lived a king and a queen.",
    "one, two, three, four, five, six, seven, eight, nine, ten."};

template <size_t N>
std::string_view pick(PhiloxStream& rng, const std::array<std::string_view, N>& words) {
  return words[rng.below(N)];
}

// "the red fox", "a fox", "an old king": the article agrees with the next word,
// one more dependency for a model to pick up.
void noun_phrase(PhiloxStream& rng, std::string& out) {
  const bool definite = rng.below(2) != 0;
  const std::string_view adjective = rng.below(2) ? pick(rng, kAdjectives) : std::string_view();
  const std::string_view noun = pick(rng, kNouns);
  const char next = adjective.empty() ? noun.front() : adjective.front();
  if (definite) {
    out += "the ";
  } else {
    out += std::string_view("aeiou").find(next) == std::string_view::npos ? "a " : "an ";
  }
  if (!adjective.empty()) {
    out += adjective;
    out += ' ';
  }
  out += noun;
}

void sentence(PhiloxStream& rng, std::string& out) {
  const size_t start = out.size();
  noun_phrase(rng, out);
  out += ' ';
  out += pick(rng, kVerbs);
  out += ' ';
  noun_phrase(rng, out);
  if (rng.below(3) == 0) {
    out += ' ';
    out += pick(rng, kPlaces);
  }
  out += '.';
  out[start] = char(out[start] - 'a' + 'A');  // sentences start capitalised
}

void arithmetic(PhiloxStream& rng, std::string& out) {
  const bool product = rng.below(3) == 0;
  const int64_t hi = product ? 12 : 99;
  const int64_t a = rng.range(0, hi), b = rng.range(0, hi);
  out += std::to_string(a);
  out += product ? '*' : '+';
  out += std::to_string(b);
  out += '=';
  out += std::to_string(product ? a * b : a + b);
  out += '.';
}

void counting(PhiloxStream& rng, std::string& out) {
  const int64_t first = rng.range(0, 90), len = rng.range(3, 9);
  out += "count from ";
  out += std::to_string(first);
  out += ':';
  for (int64_t i = 0; i < len; ++i) {
    out += ' ';
    out += std::to_string(first + i);
  }
  out += '.';
}

void spelling(PhiloxStream& rng, std::string& out) {
  const std::string_view word = rng.below(2) ? pick(rng, kNouns) : pick(rng, kAdjectives);
  out += word;
  out += " is spelled ";
  for (size_t i = 0; i < word.size(); ++i) {
    if (i) out += '-';
    out += word[i];
  }
  out += '.';
}

// One line of a kind drawn with weights sentence 4, arithmetic 2, counting 2,
// phrase 1, spelling 1.
void line(PhiloxStream& rng, std::string& out) {
  const uint64_t kind = rng.below(10);
  if (kind < 4) {
    sentence(rng, out);
  } else if (kind < 6) {
    arithmetic(rng, out);
  } else if (kind < 8) {
    counting(rng, out);
  } else if (kind < 9) {
    out += pick(rng, kPhrases);
  } else {
    spelling(rng, out);
  }
  out += '\n';
}

}  // namespace

TokenData synthetic_corpus(uint64_t seed, size_t n_bytes) {
  PhiloxStream rng(seed, RngPurpose::kSynthetic);
  std::string text;
  text.reserve(n_bytes + 128);
  while (text.size() < n_bytes) line(rng, text);
  TokenData out;
  out.tokens.assign(text.begin(), text.begin() + std::ptrdiff_t(n_bytes));
  out.vocab_size = 256;
  out.source = "synthetic";
  return out;
}

}  // namespace srkit
