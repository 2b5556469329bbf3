// Byte-level BPE encoding: token sequences worked out by hand for a small
// tokenizer written to disk, GPT-2's merge order, agreement with a slow
// reference (tests/bpe_reference.h) for the small and a trained tokenizer,
// and decode(encode(s)) == s for random bytes.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "lib/data/bpe_tokenizer.h"
#include "lib/data/bpe_trainer.h"
#include "lib/data/byte_symbols.h"
#include "lib/data/tokenizer_files.h"
#include "lib/util/temp_dir.h"
#include "tests/bpe_reference.h"
#include "tests/bpe_test_tokenizer.h"

using namespace srkit;
using Tokens = std::vector<std::string>;

namespace {

BpeTokenizer small_tokenizer() {
  TempDir dir("bpe");
  bpe_test::write_tokenizer_json(dir.file("tokenizer.json"));
  return BpeTokenizer(load_tokenizer_json(dir.file("tokenizer.json")).model);
}

// The bytes of each token of text.
Tokens encode(BpeTokenizer& t, const std::string& text) {
  Tokens out;
  for (int32_t id : t.encode(text)) out.push_back(t.token_bytes(id));
  return out;
}

bpe_reference::Ranks ranks_of(const BpeSpec& spec) {
  bpe_reference::Ranks ranks;
  for (size_t r = 0; r < spec.merges.size(); ++r) {
    ranks.emplace(std::make_pair(bpe_test::bytes_of_symbols(spec.merges[r].first),
                                 bpe_test::bytes_of_symbols(spec.merges[r].second)),
                  r);
  }
  return ranks;
}

bpe_reference::Ranks small_ranks() {
  bpe_reference::Ranks ranks;
  for (size_t r = 0; r < bpe_test::merges().size(); ++r) ranks.emplace(bpe_test::merges()[r], r);
  return ranks;
}

// Word-like text over the reference alphabet, for training.
std::string training_text(uint32_t seed, size_t bytes) {
  std::mt19937 rng(seed);
  std::vector<std::string> words;
  for (int w = 0; w < 300; ++w) {
    std::string word = rng() % 3 ? " " : "";
    const int letters = 1 + int(rng() % 7);
    for (int k = 0; k < letters; ++k) {
      const auto& atom = bpe_reference::alphabet()[rng() % 28];  // letters and numbers
      word += atom.bytes;
    }
    words.push_back(word);
  }
  std::string text;
  while (text.size() < bytes) {
    text += words[std::min(rng() % words.size(), rng() % words.size())];  // skewed: repeats
    if (rng() % 12 == 0) text += rng() % 2 ? ".\n" : ", ";
  }
  return text;
}

}  // namespace

TEST(BpeTokenizer, WordsAndLeadingSpaces) {
  BpeTokenizer t = small_tokenizer();
  // "h e" (rank 2) comes before "t h" (17), so "the" alone never becomes one token.
  EXPECT_EQ(encode(t, "the"), (Tokens{"t", "he"}));
  EXPECT_EQ(encode(t, " the"), (Tokens{" the"}));
  EXPECT_EQ(encode(t, "Hello world"), (Tokens{"H", "e", "l", "l", "o", " world"}));
  EXPECT_EQ(encode(t, " sing"), (Tokens{" ", "s", "ing"}));
  EXPECT_EQ(encode(t, ""), Tokens{});
}

TEST(BpeTokenizer, RepeatedPairsMergeLeftToRight) {
  BpeTokenizer t = small_tokenizer();
  EXPECT_EQ(encode(t, "aaa"), (Tokens{"aa", "a"}));
  EXPECT_EQ(encode(t, "aaaa"), (Tokens{"aa", "aa"}));
  EXPECT_EQ(encode(t, "aaaaa"), (Tokens{"aa", "aa", "a"}));
}

// A chunk of a million bytes: GPT-2's loop would take ~10^12 steps; the heap
// takes n log n.
TEST(BpeTokenizer, LongChunksMergeQuickly) {
  BpeTokenizer t = small_tokenizer();
  const std::vector<int32_t> ids = t.encode(std::string(1 << 20, 'a'));
  EXPECT_EQ(ids, std::vector<int32_t>(1 << 19, bpe_test::id("aa")));
  const std::vector<int32_t> spaces = t.encode(std::string((1 << 20) + 1, ' ') + "x");
  ASSERT_EQ(spaces.size(), size_t(1 << 18) + 2);  // 2^18 runs of four spaces, " ", "x"
  EXPECT_EQ(spaces[0], bpe_test::id("    "));
  EXPECT_EQ(spaces[1 << 18], bpe_test::id(" "));
}

TEST(BpeTokenizer, Contractions) {
  BpeTokenizer t = small_tokenizer();
  EXPECT_EQ(encode(t, "it's"), (Tokens{"i", "t", "'s"}));
  EXPECT_EQ(encode(t, "don't"), (Tokens{"d", "o", "n", "'t"}));
  EXPECT_EQ(encode(t, "they're"), (Tokens{"t", "he", "y", "'re"}));
  EXPECT_EQ(encode(t, "I've"), (Tokens{"I", "'", "v", "e"}));
  EXPECT_EQ(encode(t, "IT'S"), (Tokens{"I", "T", "'", "S"}));
}

TEST(BpeTokenizer, Whitespace) {
  BpeTokenizer t = small_tokenizer();
  EXPECT_EQ(encode(t, "a    word"), (Tokens{"a", "  ", " ", " wor", "d"}));
  EXPECT_EQ(encode(t, "x        y"), (Tokens{"x", "    ", "  ", " ", " ", "y"}));
  EXPECT_EQ(encode(t, "end  "), (Tokens{"e", "n", "d", "  "}));
  EXPECT_EQ(encode(t, "x\n\n\ny"), (Tokens{"x", "\n\n", "\n", "y"}));
  EXPECT_EQ(encode(t, "\n\n"), (Tokens{"\n\n"}));
  EXPECT_EQ(encode(t, "\t\tx"), (Tokens{"\t", "\t", "x"}));
}

TEST(BpeTokenizer, DigitsAndPunctuation) {
  BpeTokenizer t = small_tokenizer();
  EXPECT_EQ(encode(t, "12345"), (Tokens{"123", "4", "5"}));
  EXPECT_EQ(encode(t, "1 12"), (Tokens{"1", " ", "12"}));
  EXPECT_EQ(encode(t, "Hi!!! ok?"), (Tokens{"H", "i", "!!", "!", " ", "o", "k", "?"}));
  EXPECT_EQ(encode(t, "a !!"), (Tokens{"a", " !!"}));
}

TEST(BpeTokenizer, UnicodeLetters) {
  BpeTokenizer t = small_tokenizer();
  EXPECT_EQ(encode(t, "caf\xc3\xa9"), (Tokens{"c", "a", "f", "\xc3\xa9"}));
  EXPECT_EQ(encode(t,
                   "\xc3\xbc"
                   "ber"),
            (Tokens{"\xc3\xbc", "b", "er"}));
  EXPECT_EQ(encode(t, " \xe4\xb8\xad\xe6\x96\x87"),
            (Tokens{" ", "\xe4\xb8\xad", "\xe6", "\x96", "\x87"}));
  EXPECT_EQ(encode(t, "hi \xf0\x9f\x98\x80!"),
            (Tokens{"h", "i", " ", "\xf0\x9f", "\x98", "\x80", "!"}));
}

TEST(BpeTokenizer, BytesThatAreNotUtf8) {
  BpeTokenizer t = small_tokenizer();
  // "\xff\xfe" is a merge, but each byte is a chunk of its own.
  EXPECT_EQ(encode(t,
                   "ab\xff\xfe"
                   "cd"),
            (Tokens{"a", "b", "\xff", "\xfe", "c", "d"}));
  // A truncated CJK character does not merge either; the whole one does.
  EXPECT_EQ(encode(t, "\xe4\xb8"), (Tokens{"\xe4", "\xb8"}));
  EXPECT_EQ(encode(t, "\xe4\xb8\xad"), (Tokens{"\xe4\xb8\xad"}));
  EXPECT_EQ(encode(t, "\xc3"), (Tokens{"\xc3"}));
}

TEST(BpeTokenizer, IdsFollowTheVocab) {
  BpeTokenizer t = small_tokenizer();
  EXPECT_EQ(t.vocab_size(), bpe_test::kVocabSize);
  EXPECT_EQ(t.end_of_text(), bpe_test::kEndOfText);
  EXPECT_EQ(t.encode(" the world"), bpe_test::ids_of({" the", " world"}));
  EXPECT_EQ(bpe_test::id("!"), 0);  // GPT-2's order: '!' is the first symbol
  // Special tokens in the text are ordinary characters.
  const std::vector<int32_t> ids = t.encode("<|endoftext|>");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), bpe_test::kEndOfText), 0);
  EXPECT_EQ(t.decode(ids), "<|endoftext|>");
  const std::vector<int32_t> eot = {bpe_test::kEndOfText};
  EXPECT_EQ(t.decode(eot), "<|endoftext|>");
}

TEST(BpeTokenizer, DecodeRefusesIdsWithoutToken) {
  BpeTokenizer t = small_tokenizer();
  for (int32_t bad : {-1, bpe_test::kVocabSize, 1 << 30}) {
    const std::vector<int32_t> ids = {bpe_test::id("a"), bad};
    EXPECT_THROW(t.decode(ids), std::out_of_range) << bad;
    EXPECT_FALSE(t.has_token(bad));
  }
}

// GPT-2 merges every occurrence of the lowest-ranked pair before it looks at
// the pairs those merges create, even when one of those ranks lower. With the
// (inconsistent) table [ab+a, a+b], "abab" is ab|ab; merging one pair at a
// time would give aba|b.
TEST(BpeTokenizer, AllOccurrencesOfARankMergeBeforeNewPairs) {
  BpeSpec spec;
  for (int b = 0; b < 256; ++b) spec.vocab.emplace_back(byte_symbol(uint8_t(b)), b);
  spec.vocab.emplace_back("ab", 256);
  spec.vocab.emplace_back("aba", 257);
  spec.merges = {{"ab", "a"}, {"a", "b"}};
  spec.added.emplace_back("<|endoftext|>", 258);
  BpeTokenizer t(build_bpe_model(spec));
  EXPECT_EQ(encode(t, "abab"), (Tokens{"ab", "ab"}));
  EXPECT_EQ(encode(t, "aba"), (Tokens{"aba"}));
  bpe_reference::Ranks ranks = ranks_of(spec);
  EXPECT_EQ(bpe_reference::bpe("abab", ranks), (Tokens{"ab", "ab"}));
}

TEST(BpeTokenizer, MatchesTheReferenceOnRandomText) {
  BpeTokenizer t = small_tokenizer();
  const bpe_reference::Ranks ranks = small_ranks();
  std::mt19937 rng(99);
  for (int i = 0; i < 2000; ++i) {
    const std::vector<bpe_reference::Unit> units = bpe_reference::random_units(rng, 40);
    const std::string text = bpe_reference::text(units);
    ASSERT_EQ(encode(t, text), bpe_reference::tokenize(units, ranks)) << bpe_test::symbols(text);
  }
}

TEST(BpeTrainer, LearnsTheMostFrequentPairs) {
  // Pairs: a+b 4 times, then " "+ab 3 times; nothing else occurs twice.
  const BpeSpec spec = train_bpe("ab ab ab ab cd", 10);
  ASSERT_EQ(spec.merges.size(), 2u);
  EXPECT_EQ(bpe_test::bytes_of_symbols(spec.merges[0].first), "a");
  EXPECT_EQ(bpe_test::bytes_of_symbols(spec.merges[0].second), "b");
  EXPECT_EQ(bpe_test::bytes_of_symbols(spec.merges[1].first), " ");
  EXPECT_EQ(bpe_test::bytes_of_symbols(spec.merges[1].second), "ab");
  BpeTokenizer t(build_bpe_model(spec));
  EXPECT_EQ(t.vocab_size(), 259);
  EXPECT_EQ(t.end_of_text(), 258);
  EXPECT_EQ(t.encode("ab ab"), (std::vector<int32_t>{256, 257}));
}

TEST(BpeTokenizer, TrainedTokenizerMatchesTheReference) {
  const BpeSpec spec = train_bpe(training_text(1, 60000), 400);
  EXPECT_GT(spec.merges.size(), 300u);
  BpeTokenizer t(build_bpe_model(spec));
  const bpe_reference::Ranks ranks = ranks_of(spec);
  std::mt19937 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const std::vector<bpe_reference::Unit> units = bpe_reference::random_units(rng, 40);
    ASSERT_EQ(encode(t, bpe_reference::text(units)), bpe_reference::tokenize(units, ranks));
  }
  // Text like the training text: long merged tokens, cache hits, and chunks
  // too long to cache.
  const std::string text = training_text(2, 5000) + std::string(100, 'a') + std::string(90, ' ');
  std::vector<bpe_reference::Unit> units;  // the text is made of valid atoms only
  for (size_t i = 0; i < text.size();) {
    for (const auto& atom : bpe_reference::alphabet()) {
      if (atom.cls != bpe_reference::Class::kInvalid &&
          std::string_view(text).substr(i).starts_with(atom.bytes)) {
        units.push_back({atom.bytes, atom.cls});
        i += atom.bytes.size();
        break;
      }
    }
  }
  const Tokens expected = bpe_reference::tokenize(units, ranks);
  EXPECT_EQ(encode(t, text), expected);
  EXPECT_EQ(encode(t, text), expected);              // again, from the cache
  EXPECT_LT(expected.size() * 10, text.size() * 7);  // the merges do apply
}

TEST(BpeTokenizer, DecodeOfEncodeIsIdentityOnRandomBytes) {
  BpeTokenizer small = small_tokenizer();
  BpeTokenizer trained(build_bpe_model(train_bpe(training_text(3, 30000), 300)));
  std::mt19937 rng(1234);
  for (int i = 0; i < 1000; ++i) {
    std::string s;
    const int kind = i % 3;
    const int n = int(rng() % 200);
    for (int k = 0; k < n; ++k) {
      if (kind == 0) {
        s += char(rng());  // any bytes
      } else if (kind == 1) {
        s += bpe_reference::alphabet()[rng() % bpe_reference::alphabet().size()].bytes;
      } else {
        char32_t c = rng() % 0x110000;  // any scalar value, often ASCII
        if (rng() % 2) c %= 0x80;
        if (c >= 0xD800 && c <= 0xDFFF) c = ' ';
        s += bpe_test::encode_utf8(c);
      }
    }
    for (BpeTokenizer* t : {&small, &trained}) {
      const std::vector<int32_t> ids = t->encode(s);
      ASSERT_EQ(t->decode(ids), s) << i;
      for (int32_t id : ids) ASSERT_NE(id, t->end_of_text());
    }
  }
}
