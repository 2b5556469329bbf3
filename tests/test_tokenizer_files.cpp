// Reading tokenizers: tokenizer.json (merges as strings or arrays) and GPT-2's
// vocab.json + merges.txt give the same model; every malformed file is one
// line naming the file and what was expected; the tokenizer record sr-prep
// leaves beside its shards.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <string>

#include "lib/data/tokenizer_files.h"
#include "lib/data/tokenizer_info.h"
#include "lib/util/sha256.h"
#include "lib/util/temp_dir.h"
#include "tests/bpe_test_tokenizer.h"

using namespace srkit;
using nlohmann::json;
using ::testing::HasSubstr;

namespace {

void expect_same_model(const BpeModel& a, const BpeModel& b) {
  EXPECT_EQ(a.token_bytes, b.token_bytes);
  EXPECT_EQ(a.kind, b.kind);
  ASSERT_EQ(a.merges.size(), b.merges.size());
  for (size_t i = 0; i < a.merges.size(); ++i) {
    EXPECT_EQ(a.merges[i].left, b.merges[i].left);
    EXPECT_EQ(a.merges[i].right, b.merges[i].right);
    EXPECT_EQ(a.merges[i].merged, b.merges[i].merged);
  }
  EXPECT_EQ(a.end_of_text, b.end_of_text);
}

// The message of the std::runtime_error that f throws ("" if none).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TokenizerFiles, BothFormatsGiveTheSameModel) {
  TempDir dir("tokfiles");
  bpe_test::write_tokenizer_json(dir.file("tokenizer.json"));
  bpe_test::write_tokenizer_json(dir.file("arrays.json"), /*array_merges=*/true);
  bpe_test::write_vocab_merges(dir.file("vocab.json"), dir.file("merges.txt"));
  const LoadedTokenizer a = load_tokenizer_json(dir.file("tokenizer.json"));
  const LoadedTokenizer b = load_tokenizer_json(dir.file("arrays.json"));
  const LoadedTokenizer c = load_vocab_merges(dir.file("vocab.json"), dir.file("merges.txt"));
  expect_same_model(a.model, b.model);
  expect_same_model(a.model, c.model);
  EXPECT_EQ(a.fingerprint, b.fingerprint);
  EXPECT_EQ(a.fingerprint, c.fingerprint);
  EXPECT_EQ(a.fingerprint.size(), 64u);

  EXPECT_EQ(a.model.vocab_size(), bpe_test::kVocabSize);
  EXPECT_EQ(a.model.end_of_text, bpe_test::kEndOfText);
  EXPECT_EQ(a.model.kind[bpe_test::kEndOfText], TokenKind::kSpecial);
  EXPECT_EQ(a.model.merges.size(), bpe_test::merges().size());
  EXPECT_EQ(a.model.merges[0].merged, bpe_test::id(" t"));
  EXPECT_EQ(a.model.token_bytes[bpe_test::id(" the")], " the");
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(a.model.byte_token[b], bpe_test::id(std::string(1, char(b))));
  }

  ASSERT_EQ(a.files.size(), 1u);
  EXPECT_EQ(a.files[0].sha256, sha256_file_hex(dir.file("tokenizer.json")));
  EXPECT_TRUE(std::filesystem::path(a.files[0].path).is_absolute());
  ASSERT_EQ(c.files.size(), 2u);
  EXPECT_EQ(c.files[1].sha256, sha256_file_hex(dir.file("merges.txt")));

  // load_tokenizer tells the formats apart.
  EXPECT_EQ(load_tokenizer(dir.file("tokenizer.json")).fingerprint, a.fingerprint);
  EXPECT_EQ(load_tokenizer(dir.file("vocab.json")).fingerprint, a.fingerprint);
}

TEST(TokenizerFiles, FingerprintChangesWithTheContent) {
  TempDir dir("tokfiles");
  json j = bpe_test::tokenizer_json();
  std::ofstream(dir.file("a.json")) << j.dump();
  std::swap(j["model"]["merges"][3], j["model"]["merges"][4]);  // two ranks swapped
  std::ofstream(dir.file("b.json")) << j.dump();
  EXPECT_NE(load_tokenizer_json(dir.file("a.json")).fingerprint,
            load_tokenizer_json(dir.file("b.json")).fingerprint);
}

TEST(TokenizerFiles, MalformedTokenizerJsonIsOneLineNamingTheFile) {
  TempDir dir("tokfiles");
  const std::string path = dir.file("tokenizer.json");
  struct Case {
    std::string name, expect;
    std::function<void(json&)> edit;
  };
  const std::string byte_a = bpe_test::symbols("a");
  const std::vector<Case> cases = {
      {"no model", "expected a tokenizer.json object with a \"model\"",
       [](json& j) { j.erase("model"); }},
      {"wordpiece", "model type is 'WordPiece'; expected 'BPE'",
       [](json& j) { j["model"]["type"] = "WordPiece"; }},
      {"metaspace", "expected {\"type\": \"ByteLevel\"}",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}};
       }},
      {"no pre-tokenizer", "pre_tokenizer is null", [](json& j) { j["pre_tokenizer"] = nullptr; }},
      {"prefix space", "add_prefix_space is true",
       [](json& j) { j["pre_tokenizer"]["add_prefix_space"] = true; }},
      {"normalizer", "normalizer is",
       [](json& j) {
         j["normalizer"] = {{"type", "NFC"}};
       }},
      {"dropout", "\"dropout\" is 0.1", [](json& j) { j["model"]["dropout"] = 0.1; }},
      {"ignore merges", "\"ignore_merges\" is true",
       [](json& j) { j["model"]["ignore_merges"] = true; }},
      {"suffix", "\"end_of_word_suffix\"",
       [](json& j) { j["model"]["end_of_word_suffix"] = "</w>"; }},
      {"unknown merge token", "its second token 'zz' is not in the vocab",
       [](json& j) { j["model"]["merges"].push_back("a zz"); }},
      {"merged token missing", "the merged token 'Ġs' is not in the vocab",
       [](json& j) { j["model"]["merges"].push_back("Ġ s"); }},
      {"repeated merge", "repeats an earlier merge",
       [](json& j) { j["model"]["merges"].push_back("h e"); }},
      {"bad merge", "merge 32 is \"abc\"; expected \"left right\"",
       [](json& j) { j["model"]["merges"].push_back("abc"); }},
      {"bad merge array", "expected \"left right\" or [\"left\", \"right\"]",
       [](json& j) { j["model"]["merges"].push_back(json::array({"a"})); }},
      {"no eot", "no end-of-text token '<|endoftext|>'",
       [](json& j) {
         j["added_tokens"] = json::array();
         j["model"]["vocab"].erase("<|endoftext|>");
       }},
      {"missing byte", "no token for byte 0x61",
       [byte_a](json& j) {
         j["model"]["vocab"].erase(byte_a);
         j["model"]["merges"] = json::array();
       }},
      {"not byte level", "vocab token 'a b' (id 999) is not made of byte-level symbols",
       [](json& j) { j["model"]["vocab"]["a b"] = 999; }},
      {"negative id", "has id -3, expected an id in [0,",
       [](json& j) { j["model"]["vocab"]["Ġx"] = -3; }},
      {"huge id", "has id 4000000000", [](json& j) { j["model"]["vocab"]["Ġx"] = 4000000000; }},
      {"shared id", "id 5 is given to two tokens", [](json& j) { j["model"]["vocab"]["Ġx"] = 5; }},
      {"string id", "expected an integer id for model.vocab token 'Ġx'",
       [](json& j) { j["model"]["vocab"]["Ġx"] = "7"; }},
      {"bad added token", "added token", [](json& j) { j["added_tokens"].push_back(3); }},
  };
  for (const Case& c : cases) {
    json j = bpe_test::tokenizer_json();
    c.edit(j);
    std::ofstream(path) << j.dump();
    const std::string message = error_of([&] { load_tokenizer_json(path); });
    EXPECT_THAT(message, HasSubstr("tokenizer file '" + path + "': ")) << c.name;
    EXPECT_THAT(message, HasSubstr(c.expect)) << c.name;
    EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 0) << c.name << ": " << message;
  }
  std::ofstream(path) << "{\"model\": {\n";
  const std::string message = error_of([&] { load_tokenizer_json(path); });
  EXPECT_THAT(message, HasSubstr("tokenizer file '" + path + "': expected valid JSON"));
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 0) << message;
  EXPECT_THAT(error_of([&] { load_tokenizer_json(dir.file("none.json")); }),
              HasSubstr("none.json': expected a readable file"));
}

TEST(TokenizerFiles, MalformedVocabOrMergesNamesTheFile) {
  TempDir dir("tokfiles");
  const std::string vocab = dir.file("vocab.json"), merges = dir.file("merges.txt");
  bpe_test::write_vocab_merges(vocab, merges);
  std::ofstream(merges, std::ios::app) << "h e\nabc\n";
  std::string message = error_of([&] { load_vocab_merges(vocab, merges); });
  EXPECT_THAT(message, HasSubstr("tokenizer file '" + merges + "': line 34 is 'abc'"));

  bpe_test::write_vocab_merges(vocab, merges);
  std::ofstream(merges, std::ios::app) << "a zz\n";
  message = error_of([&] { load_vocab_merges(vocab, merges); });
  EXPECT_THAT(message, HasSubstr("tokenizer files '" + vocab + "' and '" + merges + "': merge 32"));
  EXPECT_THAT(message, HasSubstr("'zz' is not in the vocab"));

  std::ofstream(vocab) << "[1, 2]";
  EXPECT_THAT(error_of([&] { load_vocab_merges(vocab, merges); }),
              HasSubstr("'" + vocab + "': expected the vocab to be an object of token -> id"));

  // A vocab.json without merges.txt beside it.
  TempDir lone("tokfiles");
  bpe_test::write_vocab_merges(lone.file("vocab.json"), lone.file("other.txt"));
  EXPECT_THAT(error_of([&] { load_tokenizer(lone.file("vocab.json")); }),
              HasSubstr("merges.txt does not exist"));
  // CRLF line ends and no "#version" line are fine.
  bpe_test::write_vocab_merges(vocab, merges);
  std::string text;
  for (const auto& [l, r] : bpe_test::merges()) {
    text += bpe_test::symbols(l) + " " + bpe_test::symbols(r) + "\r\n";
  }
  std::ofstream(merges, std::ios::binary) << text;
  EXPECT_EQ(load_vocab_merges(vocab, merges).model.merges.size(), bpe_test::merges().size());
}

TEST(TokenizerInfo, RecordRoundTripAndLookupBesideShards) {
  TempDir dir("tokinfo");
  bpe_test::write_tokenizer_json(dir.file("tokenizer.json"));
  const TokenizerInfo info = tokenizer_info_of(load_tokenizer_json(dir.file("tokenizer.json")));
  EXPECT_EQ(info.type, "bpe");
  EXPECT_EQ(info.vocab_size, bpe_test::kVocabSize);
  EXPECT_EQ(info.end_of_text, bpe_test::kEndOfText);

  EXPECT_EQ(tokenizer_info_path(dir.path(), "tiny"), dir.file("tiny_tokenizer_info.json"));
  std::ofstream(tokenizer_info_path(dir.path(), "tiny"))
      << json{{"tokenizer", info.to_json()}, {"documents", 3}}.dump();
  for (const std::string& data : {dir.file("tiny_train_*.bin"), dir.file("tiny_val_000000.bin")}) {
    const std::optional<TokenizerInfo> found = find_tokenizer_info(data);
    ASSERT_TRUE(found) << data;
    EXPECT_EQ(found->fingerprint, info.fingerprint);
    EXPECT_EQ(found->end_of_text, info.end_of_text);
    ASSERT_EQ(found->files.size(), 1u);
    EXPECT_EQ(found->files[0].sha256, info.files[0].sha256);
  }
  EXPECT_FALSE(find_tokenizer_info(dir.file("other_train_*.bin")));  // no record
  EXPECT_FALSE(find_tokenizer_info(dir.file("tiny.bin")));           // not sr-prep's naming
  EXPECT_FALSE(find_tokenizer_info(dir.file("tiny_train.txt")));

  const TokenizerInfo byte = TokenizerInfo::from_json(TokenizerInfo{}.to_json(), "x");
  EXPECT_EQ(byte.type, "byte");
  EXPECT_EQ(byte.end_of_text, -1);

  std::ofstream(tokenizer_info_path(dir.path(), "tiny")) << "{\"tokenizer\": {\"type\": 1}}";
  EXPECT_THAT(error_of([&] { find_tokenizer_info(dir.file("tiny_train_*.bin")); }),
              HasSubstr("tiny_tokenizer_info.json': expected type, vocab_size"));
  std::ofstream(tokenizer_info_path(dir.path(), "tiny")) << "not json";
  EXPECT_THAT(error_of([&] { find_tokenizer_info(dir.file("tiny_train_*.bin")); }),
              HasSubstr("expected JSON"));
}
