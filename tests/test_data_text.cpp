// Text loading (byte-level tokens) and the train/val tail split.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "lib/data/token_data.h"
#include "lib/util/temp_dir.h"
#include "tests/special_files.h"

using namespace srkit;
using ::testing::HasSubstr;

namespace {

std::string write_file(const TempDir& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TokenData iota_data(size_t n) {
  TokenData d;
  d.tokens.resize(n);
  std::iota(d.tokens.begin(), d.tokens.end(), uint16_t(0));
  d.vocab_size = 1000;
  d.source = "iota";
  return d;
}

}  // namespace

TEST(TextData, BytesBecomeTokens) {
  TempDir dir("text");
  // ASCII, a two-byte UTF-8 character (e with acute: C3 A9), a NUL and 0xFF.
  const std::string bytes = std::string("Hi\n\xC3\xA9") + '\0' + "\xFF";
  const std::string path = write_file(dir, "t.txt", bytes);
  const TokenData data = load_text_file(path);
  EXPECT_EQ(data.tokens, (std::vector<uint16_t>{'H', 'i', '\n', 0xC3, 0xA9, 0, 0xFF}));
  EXPECT_EQ(data.vocab_size, 256);
  EXPECT_EQ(data.source, path);
  // load_tokens: anything not ending in .bin is text, even with another extension.
  EXPECT_EQ(load_tokens(path).tokens, data.tokens);
  EXPECT_EQ(load_tokens(write_file(dir, "t.bin.txt", bytes)).tokens, data.tokens);
}

TEST(TextData, Errors) {
  TempDir dir("text");
  try {
    load_text_file(dir.file("missing.txt"));
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("text file '" + dir.file("missing.txt") + "': does not exist"));
  }
  const std::string empty = write_file(dir, "empty.txt", "");
  try {
    load_tokens(empty);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'" + empty + "' is empty"));
  }
}

TEST(TextData, AnythingButARegularFileIsRefusedSayingWhatItIs) {
  const testing_files::HangGuard guard;
  const testing_files::SpecialFiles files;
  for (const testing_files::SpecialPath& p : files.all()) {
    for (auto load : {load_text_file, load_tokens}) {
      try {
        load(p.path);
        ADD_FAILURE() << p.path;
      } catch (const std::runtime_error& e) {
        EXPECT_THAT(e.what(), HasSubstr("text file '" + p.path + "': " + p.kind));
      }
    }
  }
}

TEST(SplitTail, LastFractionIsVal) {
  const DataSplits s = split_tail(iota_data(100), 0.1);
  ASSERT_EQ(s.train.tokens.size(), 90u);
  ASSERT_EQ(s.val.tokens.size(), 10u);
  EXPECT_EQ(s.train.tokens.front(), 0);
  EXPECT_EQ(s.train.tokens.back(), 89);
  EXPECT_EQ(s.val.tokens.front(), 90);
  EXPECT_EQ(s.val.tokens.back(), 99);
  EXPECT_EQ(s.train.vocab_size, 1000);
  EXPECT_EQ(s.val.vocab_size, 1000);
  EXPECT_THAT(s.train.source, HasSubstr("iota"));
  EXPECT_THAT(s.val.source, HasSubstr("val"));
}

TEST(SplitTail, RoundsToNearestAndAllowsEmptyVal) {
  EXPECT_EQ(split_tail(iota_data(10), 0.25).val.tokens.size(), 3u);  // 2.5 -> 3
  EXPECT_EQ(split_tail(iota_data(10), 0.24).val.tokens.size(), 2u);  // 2.4 -> 2
  EXPECT_EQ(split_tail(iota_data(10), 0.0).val.tokens.size(), 0u);
  EXPECT_EQ(split_tail(iota_data(10), 0.0).train.tokens.size(), 10u);
  EXPECT_EQ(split_tail(iota_data(10), 0.04).val.tokens.size(), 0u);  // 0.4 rounds away
}

TEST(SplitTail, RejectsBadFractions) {
  EXPECT_THROW(split_tail(iota_data(10), -0.1), std::invalid_argument);
  EXPECT_THROW(split_tail(iota_data(10), 1.0), std::invalid_argument);
  EXPECT_THROW(split_tail(iota_data(10), std::nan("")), std::invalid_argument);
  try {
    split_tail(iota_data(1), 0.6);  // rounds to 1 val token: nothing left to train on
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("leaves no training tokens"));
  }
}
