// UTF-8 well-formedness (exhaustive up to three bytes) and GPT-2's byte alphabet.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "lib/data/byte_symbols.h"
#include "lib/data/utf8.h"
#include "tests/bpe_test_tokenizer.h"

using namespace srkit;

namespace {

// Every well-formed sequence is the encoding of exactly one scalar value.
std::set<std::string> all_encodings_of_length(size_t length) {
  std::set<std::string> out;
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    const std::string s = bpe_test::encode_utf8(c);
    if (s.size() == length) out.insert(s);
  }
  return out;
}

}  // namespace

TEST(Utf8, EverySequenceOfUpToThreeBytes) {
  for (size_t length = 1; length <= 3; ++length) {
    const std::set<std::string> valid = all_encodings_of_length(length);
    const uint32_t count = 1u << (8 * length);
    size_t accepted = 0;
    std::string s(length, '\0');
    for (uint32_t v = 0; v < count; ++v) {
      for (size_t k = 0; k < length; ++k) s[k] = char(v >> (8 * (length - 1 - k)));
      const bool is_valid = valid.count(s) > 0;
      const size_t n = utf8_sequence_length(s, 0);
      if (is_valid) {
        ASSERT_EQ(n, length) << std::hex << v;
        ASSERT_EQ(utf8_valid_prefix(s), length) << std::hex << v;
        ++accepted;
      } else {
        ASSERT_NE(n, length) << std::hex << v;
      }
    }
    EXPECT_EQ(accepted, valid.size());
  }
}

TEST(Utf8, FourByteSequences) {
  for (const std::string& s : all_encodings_of_length(4)) ASSERT_EQ(utf8_sequence_length(s, 0), 4u);
  // Random 4-byte strings: accepted exactly when they encode a scalar value.
  std::mt19937 rng(3);
  const std::set<std::string> valid = all_encodings_of_length(4);
  for (int i = 0; i < 200000; ++i) {
    std::string s(4, '\0');
    s[0] = char(0xF0 + rng() % 16);  // mostly 4-byte leads, some invalid ones
    for (int k = 1; k < 4; ++k) s[k] = char(0x70 + rng() % 0x60);
    ASSERT_EQ(utf8_sequence_length(s, 0) == 4, valid.count(s) > 0) << s;
  }
  // Named cases: above U+10FFFF, an overlong 4-byte form, a truncated one.
  EXPECT_EQ(utf8_sequence_length("\xf4\x90\x80\x80", 0), 0u);
  EXPECT_EQ(utf8_sequence_length("\xf0\x8f\xbf\xbf", 0), 0u);
  EXPECT_EQ(utf8_sequence_length("\xf0\x9f\x98", 0), 0u);
}

TEST(Utf8, ValidPrefixStopsAtTheFirstBadByte) {
  EXPECT_EQ(utf8_valid_prefix(""), 0u);
  EXPECT_EQ(utf8_valid_prefix("caf\xc3\xa9 ok"), 8u);
  EXPECT_EQ(utf8_valid_prefix("ab\xff"
                              "cd"),
            2u);
  EXPECT_EQ(utf8_valid_prefix("ab\xc3"), 2u);         // truncated at the end
  EXPECT_EQ(utf8_valid_prefix("\xed\xa0\x80x"), 0u);  // a surrogate
  EXPECT_EQ(utf8_valid_prefix("\xc0\xaf"), 0u);       // overlong '/'
  EXPECT_EQ(utf8_encode(0x4E2D), "\xe4\xb8\xad");
  EXPECT_THROW(utf8_encode(0xD800), std::invalid_argument);
  EXPECT_THROW(utf8_encode(0x110000), std::invalid_argument);
}

TEST(ByteSymbols, MatchesGpt2Alphabet) {
  const std::vector<char32_t> expected = bpe_test::gpt2_byte_code_points();
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(byte_symbol_code_point(uint8_t(b)), expected[b]) << b;
    EXPECT_EQ(byte_symbol(uint8_t(b)), bpe_test::encode_utf8(expected[b])) << b;
  }
  // Anchors every GPT-2 vocab shows: space 'Ġ', newline 'Ċ', tab 'ĉ', NUL 'Ā',
  // DEL 'ġ', soft hyphen 'Ń' (the last remapped byte).
  EXPECT_EQ(byte_symbol(' '), "\xc4\xa0");
  EXPECT_EQ(byte_symbol('\n'), "\xc4\x8a");
  EXPECT_EQ(byte_symbol('\t'), "\xc4\x89");
  EXPECT_EQ(byte_symbol(0), "\xc4\x80");
  EXPECT_EQ(byte_symbol(0x7F), "\xc4\xa1");
  EXPECT_EQ(byte_symbol(0xAD), "\xc5\x83");
  EXPECT_EQ(byte_symbol('A'), "A");
  EXPECT_EQ(byte_symbol(0xE9), "\xc3\xa9");  // printable Latin-1 stands for itself
}

TEST(ByteSymbols, RoundTripAndRejection) {
  std::mt19937 rng(11);
  for (int i = 0; i < 1000; ++i) {
    std::string bytes(rng() % 40, '\0');
    for (char& c : bytes) c = char(rng());
    const std::string symbols = bytes_to_symbols(bytes);
    EXPECT_EQ(utf8_valid_prefix(symbols), symbols.size());
    EXPECT_EQ(symbols_to_bytes(symbols), bytes);
  }
  EXPECT_EQ(symbols_to_bytes("\xc4\xa0the"), " the");
  EXPECT_EQ(symbols_to_bytes(" the"), std::nullopt);          // a raw space is no symbol
  EXPECT_EQ(symbols_to_bytes("\xe4\xb8\xad"), std::nullopt);  // nor is CJK
  EXPECT_EQ(symbols_to_bytes("\xc5\x84"), std::nullopt);      // U+0144, just past the alphabet
  EXPECT_EQ(symbols_to_bytes("\xff"), std::nullopt);          // not UTF-8
}
