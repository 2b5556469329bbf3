// SHA-256 against the FIPS 180-4 example vectors, and update() split anywhere.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>

#include "lib/util/sha256.h"
#include "lib/util/temp_dir.h"

using namespace srkit;

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(
      sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklm"
                 "nopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecewiseUpdatesEqualOneShot) {
  std::mt19937 rng(7);
  for (size_t length : {0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 1000}) {
    std::string data(length, '\0');
    for (char& c : data) c = char(rng());
    const std::string whole = sha256_hex(data);
    for (int trial = 0; trial < 20; ++trial) {
      Sha256 h;
      size_t pos = 0;
      while (pos < data.size()) {
        const size_t n = std::min<size_t>(data.size() - pos, rng() % 70);
        h.update(data.data() + pos, n);
        pos += n;
      }
      EXPECT_EQ(h.finish_hex(), whole) << "length " << length;
    }
  }
}

TEST(Sha256, FileDigestAndMissingFile) {
  TempDir dir("sha");
  std::ofstream(dir.file("f"), std::ios::binary) << "abc";
  EXPECT_EQ(sha256_file_hex(dir.file("f")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_THROW(sha256_file_hex(dir.file("missing")), std::runtime_error);
}
