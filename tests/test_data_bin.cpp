// llm.c .bin shards: writer/reader round trip, every validation error, globs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lib/data/bin_shard.h"
#include "lib/data/token_data.h"
#include "lib/util/glob.h"
#include "lib/util/temp_dir.h"
#include "tests/special_files.h"

using namespace srkit;
using ::testing::HasSubstr;

namespace {

// A raw shard with a hand-made header, so the reader's checks can be provoked.
void write_raw(const std::string& path, int32_t magic, int32_t version, int32_t count,
               const std::vector<uint16_t>& tokens, size_t extra_bytes = 0) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = count;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  out.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 2));
  const std::string junk(extra_bytes, 'x');
  out.write(junk.data(), std::streamsize(junk.size()));
}

// The message of the exception `fn` throws (fails the test if it does not).
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

}  // namespace

TEST(BinShard, RoundTripAndExactLayout) {
  TempDir dir("bin");
  const std::vector<uint16_t> tokens = {0, 1, 50256, 65535, 7, 7, 300};
  const std::string path = dir.file("a.bin");
  write_bin_shard(path, tokens);

  EXPECT_EQ(std::filesystem::file_size(path), 1024u + 2 * tokens.size());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);  // no temporary left beside it
  // Byte layout of the header, independent of our reader.
  std::ifstream in(path, std::ios::binary);
  std::vector<int32_t> header(256);
  in.read(reinterpret_cast<char*>(header.data()), 1024);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], int32_t(tokens.size()));
  for (int i = 3; i < 256; ++i) ASSERT_EQ(header[i], 0) << i;
  unsigned char first[4];
  in.read(reinterpret_cast<char*>(first), 4);
  EXPECT_EQ(first[0], 0);  // token 0, little-endian
  EXPECT_EQ(first[2], 1);  // token 1
  EXPECT_EQ(first[3], 0);

  EXPECT_EQ(read_bin_shard(path), tokens);
  const TokenData data = load_bin_shards(path);
  EXPECT_EQ(data.tokens, tokens);
  EXPECT_EQ(data.vocab_size, 65536);  // max token + 1
  EXPECT_EQ(data.source, path);
  EXPECT_EQ(load_tokens(path).tokens, tokens);  // .bin dispatches to the shard reader
}

TEST(BinShard, BadMagic) {
  TempDir dir("bin");
  const std::string path = dir.file("m.bin");
  write_raw(path, 20240521, 1, 2, {1, 2});
  const std::string msg = error_of([&] { read_bin_shard(path); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("magic 20240521"));
  EXPECT_THAT(msg, HasSubstr("expected 20240520"));
}

TEST(BinShard, BadVersion) {
  TempDir dir("bin");
  const std::string path = dir.file("v.bin");
  write_raw(path, 20240520, 2, 2, {1, 2});  // llm.c's version 2 holds uint32 tokens
  const std::string msg = error_of([&] { read_bin_shard(path); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("version 2"));
  EXPECT_THAT(msg, HasSubstr("expected 1"));
}

TEST(BinShard, Truncated) {
  TempDir dir("bin");
  const std::string path = dir.file("t.bin");
  write_raw(path, 20240520, 1, 5, {1, 2, 3});
  const std::string msg = error_of([&] { read_bin_shard(path); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("truncated: 1030 bytes, expected 1034 for 5 tokens"));

  const std::string short_header = dir.file("h.bin");
  std::ofstream(short_header, std::ios::binary) << "abc";
  EXPECT_THAT(error_of([&] { read_bin_shard(short_header); }), HasSubstr("shorter than the 1024"));
}

TEST(BinShard, ExtraBytes) {
  TempDir dir("bin");
  const std::string path = dir.file("x.bin");
  write_raw(path, 20240520, 1, 3, {1, 2, 3}, 1);
  const std::string msg = error_of([&] { read_bin_shard(path); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("1 extra bytes after 3 tokens (expected 1030 bytes)"));
}

TEST(BinShard, Empty) {
  TempDir dir("bin");
  const std::string empty_file = dir.file("e.bin");
  std::ofstream(empty_file, std::ios::binary).close();
  EXPECT_THAT(error_of([&] { read_bin_shard(empty_file); }), HasSubstr("file is empty"));

  const std::string zero_count = dir.file("z.bin");
  write_raw(zero_count, 20240520, 1, 0, {});
  const std::string msg = error_of([&] { read_bin_shard(zero_count); });
  EXPECT_THAT(msg, HasSubstr(zero_count));
  EXPECT_THAT(msg, HasSubstr("token count is 0"));

  EXPECT_THAT(error_of([&] { write_bin_shard(dir.file("w.bin"), std::vector<uint16_t>{}); }),
              HasSubstr("no tokens"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("w.bin")));
}

TEST(BinShard, MissingFileAndNoMatch) {
  TempDir dir("bin");
  EXPECT_THAT(error_of([&] { read_bin_shard(dir.file("nope.bin")); }),
              HasSubstr("token shard '" + dir.file("nope.bin") + "': does not exist"));
  EXPECT_THAT(error_of([&] { load_bin_shards(dir.file("nope.bin")); }),
              HasSubstr("token shard '" + dir.file("nope.bin") + "': does not exist"));
  EXPECT_THAT(error_of([&] { load_bin_shards(dir.file("*.bin")); }),
              HasSubstr("no files match '" + dir.file("*.bin") + "'"));
}

// A FIFO, a directory or a device named as a shard (as --data) is named for
// what it is, at once: never a hang, never "no such file".
TEST(BinShard, AnythingButARegularFileIsRefusedSayingWhatItIs) {
  const testing_files::HangGuard guard;
  const testing_files::SpecialFiles files;
  for (const testing_files::SpecialPath& p : files.all()) {
    const std::string want = "token shard '" + p.path + "': " + p.kind;
    EXPECT_THAT(error_of([&] { read_bin_shard(p.path); }), HasSubstr(want));
    EXPECT_THAT(error_of([&] { load_bin_shards(p.path); }), HasSubstr(want));
  }
  const std::string fifo_bin = files.directory() + "/f.bin";
  ASSERT_EQ(::mkfifo(fifo_bin.c_str(), 0600), 0);
  EXPECT_THAT(error_of([&] { load_tokens(fifo_bin); }),
              HasSubstr("token shard '" + fifo_bin + "': is a FIFO"));
  // A pattern skips what is not a regular file (here: matches nothing else).
  EXPECT_THAT(error_of([&] { load_bin_shards(files.directory() + "/*.bin"); }),
              HasSubstr("no files match"));
}

TEST(BinShard, GlobConcatenatesInSortedOrder) {
  TempDir dir("bin");
  // Written out of order; names sort as 000000 < 000001 < 000010.
  write_bin_shard(dir.file("d_train_000010.bin"), std::vector<uint16_t>{7, 8});
  write_bin_shard(dir.file("d_train_000000.bin"), std::vector<uint16_t>{1, 2, 3});
  write_bin_shard(dir.file("d_train_000001.bin"), std::vector<uint16_t>{4, 5, 6});
  write_bin_shard(dir.file("d_val_000000.bin"), std::vector<uint16_t>{99});
  std::filesystem::create_directory(dir.file("d_train_dir.bin"));  // directories are skipped

  const TokenData data = load_bin_shards(dir.file("d_train_*.bin"));
  EXPECT_EQ(data.tokens, (std::vector<uint16_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(data.vocab_size, 9);
  EXPECT_THAT(data.source, HasSubstr("(3 shards)"));
  EXPECT_EQ(load_tokens(dir.file("d_*_000000.bin")).tokens, (std::vector<uint16_t>{1, 2, 3, 99}));

  // One bad shard fails the whole load, naming that shard.
  write_raw(dir.file("d_train_000002.bin"), 1, 1, 1, {1});
  EXPECT_THAT(error_of([&] { load_bin_shards(dir.file("d_train_*.bin")); }),
              HasSubstr("d_train_000002.bin"));
}
