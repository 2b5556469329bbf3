// The synthetic corpus: deterministic, structured (learnable), not trivial.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "lib/data/synthetic.h"

using namespace srkit;

namespace {

std::string as_text(const TokenData& d) { return std::string(d.tokens.begin(), d.tokens.end()); }

// Shannon entropy (bits) of the byte distribution.
double unigram_entropy(const std::string& s) {
  std::array<double, 256> counts{};
  for (unsigned char c : s) counts[c] += 1;
  double h = 0;
  for (double c : counts) {
    if (c > 0) h -= c / double(s.size()) * std::log2(c / double(s.size()));
  }
  return h;
}

// Entropy of the next byte given the previous one, H(X_t | X_{t-1}).
double bigram_conditional_entropy(const std::string& s) {
  std::map<std::pair<unsigned char, unsigned char>, double> pairs;
  std::array<double, 256> firsts{};
  for (size_t i = 1; i < s.size(); ++i) {
    pairs[{(unsigned char)s[i - 1], (unsigned char)s[i]}] += 1;
    firsts[(unsigned char)s[i - 1]] += 1;
  }
  const double n = double(s.size() - 1);
  double h = 0;
  for (const auto& [p, c] : pairs) h -= c / n * std::log2(c / firsts[p.first]);
  return h;
}

}  // namespace

TEST(SyntheticCorpus, DeterministicExactLengthAndPrefixStable) {
  const TokenData a = synthetic_corpus(42, 10000);
  const TokenData b = synthetic_corpus(42, 10000);
  const TokenData longer = synthetic_corpus(42, 25000);
  const TokenData other = synthetic_corpus(43, 10000);
  EXPECT_EQ(a.tokens.size(), 10000u);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_TRUE(std::equal(a.tokens.begin(), a.tokens.end(), longer.tokens.begin()));
  EXPECT_NE(a.tokens, other.tokens);
  EXPECT_EQ(a.vocab_size, 256);
  EXPECT_EQ(a.source, "synthetic");
  EXPECT_TRUE(synthetic_corpus(1, 0).tokens.empty());
  for (uint16_t t : a.tokens) ASSERT_TRUE(t == '\n' || (t >= 32 && t < 127)) << t;
}

TEST(SyntheticCorpus, StructuredButNotConstant) {
  const std::string text = as_text(synthetic_corpus(7, 200000));
  const double h1 = unigram_entropy(text);
  const double h2 = bigram_conditional_entropy(text);
  // English-like text has ~4.1-4.5 bits/byte of unigram entropy; uniform noise 8.
  // Measured for this seed: see the assertion message on failure.
  EXPECT_LT(h1, 5.0) << "unigram " << h1;
  EXPECT_GT(h1, 3.0) << "unigram " << h1;
  // Context helps a lot: the previous byte removes well over a bit.
  EXPECT_LT(h2, h1 - 1.0) << "unigram " << h1 << " bigram-conditional " << h2;
  EXPECT_GT(h2, 1.0) << "some randomness must remain";  // not a memorisable cycle
}

TEST(SyntheticCorpus, EveryLineIsWellFormedAndArithmeticIsRight) {
  const std::string text = as_text(synthetic_corpus(2024, 60000));
  std::istringstream lines(text);
  const std::regex sum(R"((\d+)\+(\d+)=(\d+)\.)");
  const std::regex product(R"((\d+)\*(\d+)=(\d+)\.)");
  const std::regex count(R"(count from (\d+):((?: \d+)+)\.)");
  const std::regex spelled(R"(([a-z]+) is spelled ([a-z](?:-[a-z])*)\.)");
  const std::regex sentence(R"([A-Z][a-z ,]*\.)");
  // "a" before a consonant, "an" before a vowel.
  const std::regex bad_article(R"(\b[Aa] [aeiou]|\b[Aa]n [^aeiou])");
  std::map<std::string, int> kinds;
  std::string line;
  std::smatch m;
  int checked = 0;
  while (std::getline(lines, line)) {
    if (lines.eof()) break;  // the last line may be cut by n_bytes
    ++checked;
    if (std::regex_match(line, m, sum)) {
      ASSERT_EQ(std::stoi(m[1]) + std::stoi(m[2]), std::stoi(m[3])) << line;
      ++kinds["sum"];
    } else if (std::regex_match(line, m, product)) {
      ASSERT_EQ(std::stoi(m[1]) * std::stoi(m[2]), std::stoi(m[3])) << line;
      ++kinds["product"];
    } else if (std::regex_match(line, m, count)) {
      std::istringstream nums(m[2].str());
      int expect = std::stoi(m[1]), n = 0, v = 0;
      while (nums >> v) {
        ASSERT_EQ(v, expect++) << line;
        ++n;
      }
      ASSERT_GE(n, 3) << line;
      ++kinds["count"];
    } else if (std::regex_match(line, m, spelled)) {
      std::string letters = m[2].str();
      std::erase(letters, '-');
      ASSERT_EQ(letters, m[1].str()) << line;
      ++kinds["spelled"];
    } else {
      // Sentences and recurring phrases: letters, spaces and commas ending in '.'.
      ASSERT_TRUE(std::regex_match(line, sentence) ||
                  std::regex_match(line, std::regex(R"([a-z ,]+\.)")))
          << line;
      ASSERT_FALSE(std::regex_search(line, bad_article)) << line;
      ++kinds[std::isupper((unsigned char)line[0]) ? "sentence" : "phrase"];
    }
  }
  ASSERT_GT(checked, 1000);
  // All five kinds occur, roughly in their 4:2:2:1:1 proportions (sums and
  // products share the arithmetic 2; loose bounds, fixed seed).
  const double n = checked;
  EXPECT_NEAR(kinds["sentence"] / n, 0.4, 0.05);
  EXPECT_NEAR((kinds["sum"] + kinds["product"]) / n, 0.2, 0.04);
  EXPECT_NEAR(kinds["count"] / n, 0.2, 0.04);
  EXPECT_NEAR(kinds["phrase"] / n, 0.1, 0.03);
  EXPECT_NEAR(kinds["spelled"] / n, 0.1, 0.03);
  EXPECT_GT(kinds["product"], 0);
}
