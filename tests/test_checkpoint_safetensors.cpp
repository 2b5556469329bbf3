// safetensors: round trip, exact byte layout, every reader error, atomic writes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lib/checkpoint/safetensors.h"
#include "lib/util/temp_dir.h"
#include "tests/file_size_limit.h"
#include "tests/special_files.h"

using namespace srkit;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A file with a hand-written JSON header (padded like the writer does) and `data`.
std::string handmade(const std::string& json, const std::string& data) {
  std::string header = json;
  header.append((8 - header.size() % 8) % 8, ' ');
  const uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception";
  return "";
}

struct Fixture {
  std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
  std::vector<uint16_t> bf16 = {0x3f80, 0xbf80, 0x7f80, 0x0001};
  std::vector<uint16_t> u16 = {0, 65535, 50256};
  std::vector<int16_t> i16 = {-32768, 32767};
  std::vector<uint64_t> u64 = {0x0123456789abcdefull};
  std::vector<TensorRef> refs() const {
    return {{"wte", "F32", {2, 3}, f32.data(), f32.size() * 4},
            {"ln.gain", "BF16", {4}, bf16.data(), bf16.size() * 2},
            {"tokens", "U16", {3}, u16.data(), u16.size() * 2},
            {"deltas", "I16", {1, 2}, i16.data(), i16.size() * 2},
            {"step", "U64", {}, u64.data(), 8},
            {"empty", "F32", {0, 5}, nullptr, 0}};
  }
  std::map<std::string, std::string> meta = {{"step", "1000"}, {"config", "{\"n_layer\": 4}"}};
};

}  // namespace

TEST(Safetensors, RoundTripSeveralDtypesWithMetadata) {
  TempDir dir("st");
  const std::string path = dir.file("ckpt.safetensors");
  const Fixture fx;
  save_safetensors(path, fx.refs(), fx.meta);
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  const SafetensorsReader r(path);
  EXPECT_EQ(r.metadata(), fx.meta);
  EXPECT_EQ(r.names(),
            (std::vector<std::string>{"wte", "ln.gain", "tokens", "deltas", "step", "empty"}));
  EXPECT_TRUE(r.has("wte"));
  EXPECT_FALSE(r.has("nope"));
  EXPECT_FALSE(r.has("__metadata__"));

  const auto info = r.info("wte");
  EXPECT_EQ(info.dtype, "F32");
  EXPECT_EQ(info.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(info.nbytes, 24u);
  std::vector<float> f32(6);
  r.read("wte", f32.data(), 24);
  EXPECT_EQ(std::memcmp(f32.data(), fx.f32.data(), 24), 0);
  std::vector<uint16_t> bf16(4), u16(3);
  std::vector<int16_t> i16(2);
  uint64_t u64 = 0;
  r.read("ln.gain", bf16.data(), 8);
  r.read("tokens", u16.data(), 6);
  r.read("deltas", i16.data(), 4);
  r.read("step", &u64, 8);
  EXPECT_EQ(bf16, fx.bf16);
  EXPECT_EQ(u16, fx.u16);
  EXPECT_EQ(i16, fx.i16);
  EXPECT_EQ(u64, fx.u64[0]);
  EXPECT_EQ(r.info("step").shape, std::vector<int64_t>{});
  EXPECT_EQ(r.info("empty").nbytes, 0u);
  r.read("empty", nullptr, 0);
}

TEST(Safetensors, ByteLayoutFollowsTheSpec) {
  TempDir dir("st");
  const std::string path = dir.file("a.safetensors");
  const std::vector<uint16_t> v = {0x1234, 0xabcd};
  save_safetensors(path, {{"x", "BF16", {2}, v.data(), 4}}, {{"k", "v"}});
  const std::string bytes = read_all(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ((8 + n) % 8, 0u);  // data buffer aligned
  EXPECT_EQ(
      header.rfind(
          R"({"__metadata__":{"k":"v"},"x":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", 0),
      0u);
  EXPECT_EQ(header.find_first_not_of(' ', 80), std::string::npos);  // padding is spaces
  EXPECT_EQ(bytes.size(), 8 + n + 4);
  EXPECT_EQ(bytes.substr(8 + n), std::string("\x34\x12\xcd\xab", 4));  // little-endian
}

TEST(Safetensors, ReadsAHandWrittenFileWithOffsetsOutOfNameOrder) {
  TempDir dir("st");
  const std::string path = dir.file("h.safetensors");
  write_all(path, handmade(R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                           R"("a":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})",
                           "xyz"));
  const SafetensorsReader r(path);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"b", "a"}));
  EXPECT_TRUE(r.metadata().empty());
  char a = 0;
  r.read("a", &a, 1);
  EXPECT_EQ(a, 'z');
}

TEST(Safetensors, WriterRejectsBadTensors) {
  TempDir dir("st");
  const std::string path = dir.file("w.safetensors");
  const float x[4] = {};
  EXPECT_THAT(error_of([&] {
                save_safetensors(path, {{"a", "F32", {3}, x, 16}}, {});
              }),
              HasSubstr("tensor 'a': 16 bytes given, F32 [3] needs 12"));
  EXPECT_THAT(error_of([&] {
                save_safetensors(path, {{"a", "F31", {4}, x, 16}}, {});
              }),
              HasSubstr("unknown safetensors dtype 'F31'"));
  EXPECT_THAT(error_of([&] {
                save_safetensors(path, {{"a", "F32", {4}, x, 16}, {"a", "F32", {4}, x, 16}}, {});
              }),
              HasSubstr("duplicate"));
  EXPECT_THAT(error_of([&] {
                save_safetensors(path, {{"__metadata__", "F32", {4}, x, 16}}, {});
              }),
              HasSubstr("reserved"));
  EXPECT_THAT(error_of([&] {
                save_safetensors(path, {{"a", "F32", {-4}, x, 16}}, {});
              }),
              HasSubstr("bad shape"));
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

// Every way a file can be broken gives one line that names the file.
TEST(Safetensors, ReaderErrors) {
  TempDir dir("st");
  const std::string good_tensor = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string eight(8, '\0');
  struct Case {
    const char* name;
    std::string bytes;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"short", "abc", "shorter than the 8-byte header length"},
      {"huge_len", std::string("\xff\xff\xff\x00\x00\x00\x00\x00", 8) + "{}", "header length"},
      {"truncated_header", handmade("{" + good_tensor + "}", eight).substr(0, 20), "header length"},
      {"bad_json", handmade("{\"t\": [1, 2", ""), "header is not valid JSON (at byte 17)"},
      {"number_overflow",
       handmade(R"({"t":{"dtype":"U8","shape":[1e999],"data_offsets":[0,0]}})", ""),
       "header is not valid JSON (a number out of range)"},
      {"duplicate_tensor", handmade("{" + good_tensor + "," + good_tensor + "}", eight),
       "tensor name 't' appears twice in the header"},
      {"duplicate_field",
       handmade(R"({"t":{"dtype":"F32","dtype":"BF16","shape":[2],"data_offsets":[0,8]}})", eight),
       "key 'dtype' appears twice in the header"},
      {"duplicate_metadata", handmade(R"({"__metadata__":{"step":"1","step":"2"}})", ""),
       "key 'step' appears twice in the header"},
      {"control_characters_in_a_name",
       handmade(R"({"a\nb\u0001":{"dtype":"U8","shape":[1],"data_offsets":[0,2]}})", "xy"),
       "tensor 'a\\nb\\x01': 2 bytes but U8 [1] needs 1"},
      {"duplicate_metadata_block",
       handmade(R"({"__metadata__":{"a":"1"},"__metadata__":{"b":"2"}})", ""),
       "'__metadata__' appears twice"},
      {"not_object", handmade("[1, 2]", ""), "not a JSON object"},
      {"meta_not_string", handmade(R"({"__metadata__":{"step":1}})", ""), "'step' is not a string"},
      {"meta_not_object", handmade(R"({"__metadata__":[1]})", ""), "__metadata__ is not an object"},
      {"missing_dtype", handmade(R"({"t":{"shape":[2],"data_offsets":[0,8]}})", eight),
       "tensor 't': missing string \"dtype\""},
      {"unknown_dtype", handmade(R"({"t":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}})", eight),
       "unknown safetensors dtype 'F7'"},
      {"bad_shape", handmade(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
       "shape has a non-integer or negative entry"},
      {"missing_offsets", handmade(R"({"t":{"dtype":"F32","shape":[2]}})", eight),
       "\"data_offsets\" is not [begin, end]"},
      {"reversed_offsets",
       handmade(R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})", eight),
       "outside the 8-byte data buffer"},
      {"truncated_data", handmade("{" + good_tensor + "}", "1234"),
       "data_offsets [0, 8] outside the 4-byte data buffer (truncated?)"},
      {"wrong_size", handmade(R"({"t":{"dtype":"BF16","shape":[2],"data_offsets":[0,8]}})", eight),
       "tensor 't': 8 bytes but BF16 [2] needs 4"},
      {"overlap",
       handmade(R"({"a":{"dtype":"U8","shape":[6],"data_offsets":[0,6]},)"
                R"("b":{"dtype":"U8","shape":[6],"data_offsets":[2,8]}})",
                eight),
       "overlaps another tensor"},
      {"gap",
       handmade(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                R"("b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})",
                eight),
       "unindexed bytes 2..6 before tensor 'b'"},
      {"trailing", handmade("{" + good_tensor + "}", eight + "xx"),
       "2 bytes after the last tensor"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.file(std::string(c.name) + ".safetensors");
    write_all(path, c.bytes);
    const std::string msg = error_of([&] { SafetensorsReader r(path); });
    EXPECT_THAT(msg, HasSubstr("'" + path + "'")) << c.name;
    EXPECT_THAT(msg, HasSubstr(c.message)) << c.name;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << c.name << ": " << msg;
  }
  EXPECT_THAT(error_of([&] { SafetensorsReader r(dir.file("missing.safetensors")); }),
              HasSubstr("missing.safetensors': does not exist"));
}

TEST(Safetensors, ReaderRefusesAnythingButARegularFileAtOnce) {
  const testing_files::HangGuard guard;
  const testing_files::SpecialFiles files;
  for (const testing_files::SpecialPath& p : files.all()) {
    EXPECT_THAT(error_of([&] { SafetensorsReader r(p.path); }),
                HasSubstr("safetensors file '" + p.path + "': " + p.kind));
  }
}

// The reader keeps the file it validated open: replacing the path afterwards
// (a new checkpoint renamed over it) cannot pair this header with other bytes.
TEST(Safetensors, ReadsTheBytesOfTheFileWhoseHeaderItChecked) {
  TempDir dir("st");
  const std::string path = dir.file("ckpt.safetensors");
  const std::vector<float> first = {1, 2, 3}, second = {4, 5, 6};
  save_safetensors(path, {{"w", "F32", {3}, first.data(), 12}}, {});
  const SafetensorsReader r(path);
  save_safetensors(path, {{"w", "F32", {3}, second.data(), 12}}, {});
  std::vector<float> got(3);
  r.read("w", got.data(), 12);
  EXPECT_EQ(got, first);
}

TEST(Safetensors, ReadChecksNameAndSize) {
  TempDir dir("st");
  const std::string path = dir.file("r.safetensors");
  const Fixture fx;
  save_safetensors(path, fx.refs(), {});
  const SafetensorsReader r(path);
  std::vector<float> buf(8);
  EXPECT_THAT(error_of([&] { r.read("wte", buf.data(), 28); }),
              HasSubstr("tensor 'wte' has 24 bytes (F32 [2, 3]), caller expects 28"));
  EXPECT_THAT(error_of([&] { r.read("wpe", buf.data(), 24); }), HasSubstr("no tensor named 'wpe'"));
  EXPECT_THAT(error_of([&] { r.info("wpe"); }), HasSubstr(path));
  // The file shrinks after the header was validated: the read reports it.
  fs::resize_file(path, fs::file_size(path) - 20);
  EXPECT_THAT(error_of([&] { r.read("deltas", buf.data(), 4); }), HasSubstr("cannot read tensor"));
}

TEST(Safetensors, FailedWriteLeavesTheOldFileIntact) {
  TempDir dir("st");
  const std::string path = dir.file("ckpt.safetensors");
  const std::vector<float> old_values = {1, 2, 3};
  save_safetensors(path, {{"w", "F32", {3}, old_values.data(), 12}}, {{"step", "1"}});
  const std::string before = read_all(path);

  // The disk fills up during the write (a file-size limit stands in for it).
  const std::vector<float> new_values(4096, 4.0f);
  {
    srkit::testing_faults::ScopedFileSizeLimit full_disk(1024);
    EXPECT_THAT(error_of([&] {
                  save_safetensors(path, {{"w", "F32", {4096}, new_values.data(), 4 * 4096}},
                                   {{"step", "2"}});
                }),
                HasSubstr("cannot write '" + path + "': no space"));
  }
  EXPECT_EQ(read_all(path), before);

  // A directory that does not exist: nothing is created anywhere.
  EXPECT_THROW(save_safetensors(dir.file("no/such/dir.safetensors"),
                                {{"w", "F32", {3}, new_values.data(), 12}}, {}),
               std::runtime_error);

  // Invalid input is rejected before the old file is touched.
  EXPECT_THROW(save_safetensors(path, {{"w", "F32", {4}, new_values.data(), 12}}, {}),
               std::invalid_argument);
  EXPECT_EQ(read_all(path), before);

  // A successful overwrite replaces the content and leaves no .tmp behind.
  save_safetensors(path, {{"w", "F32", {3}, new_values.data(), 12}}, {{"step", "2"}});
  EXPECT_EQ(SafetensorsReader(path).metadata().at("step"), "2");
  EXPECT_EQ(std::vector<std::string>(1, "ckpt.safetensors"), [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.path()))
      names.push_back(e.path().filename().string());
    return names;
  }());
}
