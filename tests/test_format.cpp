// lib/util/format.h: printf into a string, and printable(), which every error
// that quotes outside text uses so the message stays one line.
#include <gtest/gtest.h>

#include <string>

#include "lib/util/format.h"

using srkit::printable;
using srkit::strprintf;

TEST(Format, Strprintf) {
  EXPECT_EQ(strprintf("%d-%s", 7, "x"), "7-x");
  EXPECT_EQ(strprintf("%s", ""), "");
  EXPECT_EQ(strprintf("%0300d", 1).size(), 300u);
}

TEST(Format, PrintableEscapesControlCharactersOnly) {
  EXPECT_EQ(printable("plain text/with 'quotes' \\ and \xc3\xa9"),
            "plain text/with 'quotes' \\ and \xc3\xa9");
  EXPECT_EQ(printable("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(printable(std::string("\x00\x01\x1f\x7f", 4)), "\\x00\\x01\\x1f\\x7f");
  EXPECT_EQ(printable(""), "");
}
