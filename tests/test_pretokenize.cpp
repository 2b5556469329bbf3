// GPT-2's pre-tokenizer: known chunkings worked out by hand from the regex, the
// same splits as a plain reference loop on random text (with bytes that are
// not UTF-8), long runs, and -- where Python's `regex` module is installed --
// the same splits as GPT-2's own regex engine.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "lib/data/pretokenize.h"
#include "lib/util/temp_dir.h"
#include "tests/bpe_reference.h"
#include "tests/bpe_test_tokenizer.h"

using namespace srkit;

namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view c : pretokenize(text)) out.emplace_back(c);
  return out;
}

using Chunks = std::vector<std::string>;

}  // namespace

TEST(Pretokenize, WordsTakeTheirLeadingSpace) {
  EXPECT_EQ(split("Hello world"), (Chunks{"Hello", " world"}));
  EXPECT_EQ(split("the cat sat"), (Chunks{"the", " cat", " sat"}));
  EXPECT_EQ(split(""), Chunks{});
  EXPECT_EQ(split("x"), Chunks{"x"});
}

TEST(Pretokenize, Contractions) {
  EXPECT_EQ(split("it's"), (Chunks{"it", "'s"}));
  EXPECT_EQ(split("don't"), (Chunks{"don", "'t"}));
  EXPECT_EQ(split("they're"), (Chunks{"they", "'re"}));
  EXPECT_EQ(split("I've"), (Chunks{"I", "'ve"}));
  EXPECT_EQ(split("I'm"), (Chunks{"I", "'m"}));
  EXPECT_EQ(split("we'll"), (Chunks{"we", "'ll"}));
  EXPECT_EQ(split("I'd"), (Chunks{"I", "'d"}));
  // The first alternative wins, not the longest: 's of "'sweet".
  EXPECT_EQ(split("'sweet"), (Chunks{"'s", "weet"}));
  // Case-sensitive, as in GPT-2: "'S" is punctuation then a letter.
  EXPECT_EQ(split("IT'S"), (Chunks{"IT", "'", "S"}));
  // After a space the apostrophe is punctuation with that space.
  EXPECT_EQ(split("a 's"), (Chunks{"a", " '", "s"}));
}

TEST(Pretokenize, Whitespace) {
  // A run before a word leaves its last space to the word.
  EXPECT_EQ(split("a  b"), (Chunks{"a", " ", " b"}));
  EXPECT_EQ(split("a    word"), (Chunks{"a", "   ", " word"}));
  // Trailing whitespace is one chunk.
  EXPECT_EQ(split("end  "), (Chunks{"end", "  "}));
  EXPECT_EQ(split("end\n"), (Chunks{"end", "\n"}));
  // Newlines: the run gives back its last character, which then stands alone.
  EXPECT_EQ(split("x\n\ny"), (Chunks{"x", "\n", "\n", "y"}));
  EXPECT_EQ(split("x\n\n\ny"), (Chunks{"x", "\n\n", "\n", "y"}));
  EXPECT_EQ(split("a \n b"), (Chunks{"a", " \n", " b"}));
  // Only a plain space joins the next word; a tab does not.
  EXPECT_EQ(split("\t\tx"), (Chunks{"\t", "\t", "x"}));
  EXPECT_EQ(split("a\t b"), (Chunks{"a", "\t", " b"}));
  // Unicode whitespace (White_Space): no-break space, NEL, ideographic space.
  EXPECT_EQ(split("a\xc2\xa0"
                  "b"),
            (Chunks{"a", "\xc2\xa0", "b"}));
  EXPECT_EQ(split("a\xc2\x85"
                  "b"),
            (Chunks{"a", "\xc2\x85", "b"}));
  EXPECT_EQ(split("a\xe3\x80\x80\xe3\x80\x80 b"), (Chunks{"a", "\xe3\x80\x80\xe3\x80\x80", " b"}));
  // U+180E is not White_Space (PCRE2's own \s would take it).
  EXPECT_EQ(split("a\xe1\xa0\x8e b"), (Chunks{"a", "\xe1\xa0\x8e", " b"}));
}

TEST(Pretokenize, DigitsAndPunctuation) {
  EXPECT_EQ(split("abc123 4567"), (Chunks{"abc", "123", " 4567"}));
  EXPECT_EQ(split("x\xd9\xa3\xd9\xa4"), (Chunks{"x", "\xd9\xa3\xd9\xa4"}));  // Arabic-Indic digits
  EXPECT_EQ(split(" \xc2\xbd"
                  "1"),
            (Chunks{" \xc2\xbd"
                    "1"}));  // U+00BD is \p{N}
  EXPECT_EQ(split("Hi!!! ok?"), (Chunks{"Hi", "!!!", " ok", "?"}));
  EXPECT_EQ(split("(a, b)."), (Chunks{"(", "a", ",", " b", ")."}));
  EXPECT_EQ(split("<|endoftext|>"), (Chunks{"<|", "endoftext", "|>"}));
}

TEST(Pretokenize, UnicodeLetters) {
  EXPECT_EQ(split("caf\xc3\xa9 \xc3\xbc"
                  "ber"),
            (Chunks{"caf\xc3\xa9",
                    " \xc3\xbc"
                    "ber"}));
  EXPECT_EQ(split(" \xe4\xb8\xad\xe6\x96\x87!"), (Chunks{" \xe4\xb8\xad\xe6\x96\x87", "!"}));
  // An emoji is a symbol (So): it joins punctuation and a leading space.
  EXPECT_EQ(split("hi \xf0\x9f\x98\x80!"), (Chunks{"hi", " \xf0\x9f\x98\x80!"}));
  // A combining accent (Mn) is neither letter nor number.
  EXPECT_EQ(split("e\xcc\x81t"), (Chunks{"e", "\xcc\x81", "t"}));
}

TEST(Pretokenize, BytesThatAreNotUtf8StandAlone) {
  EXPECT_EQ(split("ab\xff\xfe"
                  "cd"),
            (Chunks{"ab", "\xff", "\xfe", "cd"}));
  // The run before the byte ends as at the end of the text: "\s+(?!\S)" takes it all.
  EXPECT_EQ(split("a  \xff b"), (Chunks{"a", "  ", "\xff", " b"}));
  EXPECT_EQ(split("word\xc3"), (Chunks{"word", "\xc3"}));              // truncated e acute
  EXPECT_EQ(split("\xe4\xb8x"), (Chunks{"\xe4", "\xb8", "x"}));        // truncated CJK
  EXPECT_EQ(split("\xed\xa0\x80"), (Chunks{"\xed", "\xa0", "\x80"}));  // a surrogate
  EXPECT_EQ(split("\xc0\xaf"), (Chunks{"\xc0", "\xaf"}));              // overlong
  EXPECT_EQ(split("!\xff!"), (Chunks{"!", "\xff", "!"}));
  EXPECT_EQ(split("\xc3\xa9"), (Chunks{"\xc3\xa9"}));  // while e acute itself is a letter
}

TEST(Pretokenize, LongRunsAreSplitInLinearTime) {
  const std::string spaces(1 << 22, ' ');
  EXPECT_EQ(split(spaces + "x"), (Chunks{std::string((1 << 22) - 1, ' '), " x"}));
  const std::string letters(1 << 22, 'a');
  EXPECT_EQ(split(letters), (Chunks{letters}));
  const std::string invalid(1 << 20, '\xff');
  EXPECT_EQ(pretokenize(invalid).size(), size_t(1) << 20);
}

TEST(Pretokenize, MatchesTheReferenceOnRandomText) {
  std::mt19937 rng(2024);
  for (int i = 0; i < 3000; ++i) {
    const std::vector<bpe_reference::Unit> units = bpe_reference::random_units(rng, 30);
    const std::string text = bpe_reference::text(units);
    ASSERT_EQ(split(text), bpe_reference::chunks(units)) << nlohmann::json(bpe_test::symbols(text));
  }
}

// GPT-2's encoder.py runs this regex with Python's `regex` module. Where that
// module is installed, random valid text from old, stable Unicode blocks must
// split the same way.
TEST(Pretokenize, MatchesPythonRegexModule) {
  if (std::system("python3 -c 'import regex' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 with the `regex` module is not installed";
  }
  const std::vector<std::pair<char32_t, char32_t>> blocks = {
      {0x20, 0x7E},     {0x09, 0x0D},     {0xA0, 0xFF},     {0x370, 0x3FF},   {0x400, 0x4FF},
      {0x600, 0x6FF},   {0x2000, 0x206F}, {0x3000, 0x303F}, {0x4E00, 0x4FFF}, {0x1F600, 0x1F64F},
      {0x0300, 0x036F}, {0x1C, 0x1F},     {0x85, 0x85},     {0x180E, 0x180E}};
  std::mt19937 rng(5);
  nlohmann::json texts = nlohmann::json::array();
  for (int i = 0; i < 2000; ++i) {
    std::string s;
    const int n = int(rng() % 25);
    for (int k = 0; k < n; ++k) {
      // Mostly ASCII letters and spaces, so that words and runs form.
      const int pick = int(rng() % 10);
      if (pick < 4) {
        s += char('a' + rng() % 3);
      } else if (pick < 6) {
        s += ' ';
      } else {
        const auto [lo, hi] = blocks[rng() % blocks.size()];
        s += bpe_test::encode_utf8(lo + char32_t(rng() % (hi - lo + 1)));
      }
    }
    texts.push_back(s);
  }
  TempDir dir("pretok");
  std::ofstream(dir.file("in.json")) << texts.dump();
  std::ofstream(dir.file("split.py")) << R"(import json, sys, regex
pat = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
texts = json.load(open(sys.argv[1], encoding="utf-8"))
json.dump([pat.findall(t) for t in texts], open(sys.argv[2], "w", encoding="utf-8"))
)";
  const std::string cmd =
      "python3 " + dir.file("split.py") + " " + dir.file("in.json") + " " + dir.file("out.json");
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(dir.file("out.json"));
  const nlohmann::json expected = nlohmann::json::parse(in);
  ASSERT_EQ(expected.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(split(texts[i].get<std::string>()), expected[i].get<Chunks>())
        << nlohmann::json(bpe_test::symbols(texts[i].get<std::string>()));
  }
}
