// checksum_bytes (lib/util/checksum.h) is XXH64 with seed 0: known answers from
// the reference tool (`xxhsum -H64`, xxHash 0.8.1) for every length class of the
// algorithm (empty, tail bytes only, 4- and 8-byte tails, one and several
// 32-byte stripes), and any single flipped bit changes the checksum.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lib/util/checksum.h"

using srkit::checksum_bytes;

namespace {

// Byte i of the length-n test input: (7 i + n) mod 256.
std::vector<unsigned char> pattern(size_t n) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 7 + n) % 256);
  return v;
}

}  // namespace

TEST(Checksum, MatchesXxh64KnownAnswers) {
  const std::pair<size_t, uint64_t> known[] = {
      {0, 0xef46db3751d8e999ull},    {1, 0x8a4127811b21e730ull},    {3, 0x31d2363f52e564c9ull},
      {4, 0xb4d516af63f9c743ull},    {7, 0x2163df11c0cdf8cdull},    {8, 0xd5474d6ca50def58ull},
      {31, 0xc025b4c3c4880c7aull},   {32, 0x178ae25cee6f7994ull},   {33, 0x4072a28263e977efull},
      {63, 0x47948108b5ff3162ull},   {64, 0xcf35552f599ba94dull},   {100, 0x3a7fdc0febf6f5dcull},
      {1003, 0xc9287a1737d24202ull}, {4101, 0xa498ffb66cb60c99ull},
  };
  for (const auto& [n, want] : known) {
    const std::vector<unsigned char> v = pattern(n);
    EXPECT_EQ(checksum_bytes(v.data(), v.size()), want) << n << " bytes";
  }
  const std::string text = "srkit";
  EXPECT_EQ(checksum_bytes(text.data(), text.size()), 0xf5ea7a5f12b6b1beull);
  const std::vector<unsigned char> zeros(1000000, 0);
  EXPECT_EQ(checksum_bytes(zeros.data(), zeros.size()), 0x8a76d36d39caaeccull);
  EXPECT_EQ(checksum_bytes(nullptr, 0), 0xef46db3751d8e999ull);
}

// Each bit of a 1003-byte input (stripes, an 8-byte tail, a 4-byte tail and
// single tail bytes) flipped alone gives a different checksum, and so do two
// equal flips in different words (which a plain xor-multiply hash can cancel).
TEST(Checksum, EveryFlippedBitChangesIt) {
  const std::vector<unsigned char> bytes = pattern(1003);
  const uint64_t h = checksum_bytes(bytes.data(), bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<unsigned char> flipped = bytes;
      flipped[i] ^= static_cast<unsigned char>(1u << bit);
      ASSERT_NE(checksum_bytes(flipped.data(), flipped.size()), h) << i << ":" << bit;
    }
  }
  std::vector<unsigned char> two = bytes;
  two[7] ^= 0x80;
  two[15] ^= 0x80;
  EXPECT_NE(checksum_bytes(two.data(), two.size()), h);
}
