// RegularFile (lib/util/regular_file.h): a regular file opens and reads; every
// other kind of path is refused at once with one line naming the path and
// saying what it is; a short read names what could not be read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

#include "lib/util/regular_file.h"
#include "lib/util/temp_dir.h"
#include "tests/special_files.h"

using namespace srkit;
using ::testing::HasSubstr;

namespace {

std::string error_of(const std::string& path) {
  try {
    RegularFile f(path, "test input");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << path;
  return "";
}

}  // namespace

TEST(RegularFile, OpensAndReadsARegularFile) {
  TempDir dir("regular");
  const std::string path = dir.file("f");
  std::ofstream(path, std::ios::binary) << "hello, world";
  const RegularFile f(path, "test input");
  EXPECT_EQ(f.size(), 12u);
  EXPECT_EQ(f.read_all(), "hello, world");
  char part[5] = {};
  f.read_at(7, part, 5, "the tail");
  EXPECT_EQ(std::string(part, 5), "world");
  RegularFile first(path, "test input");
  const RegularFile moved(std::move(first));
  EXPECT_EQ(moved.read_all(), "hello, world");
  std::ofstream(dir.file("e")).close();
  const RegularFile empty(dir.file("e"), "test input");
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.read_all(), "");
}

TEST(RegularFile, ReadingPastTheEndNamesThePart) {
  TempDir dir("regular");
  const std::string path = dir.file("short");
  std::ofstream(path, std::ios::binary) << "abc";
  const RegularFile f(path, "test input");
  char buf[8];
  try {
    f.read_at(1, buf, 8, "the header");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("test input '" + path + "': cannot read the header"));
    EXPECT_THAT(e.what(), HasSubstr("changed or truncated"));
  }
}

TEST(RegularFile, EveryOtherKindOfPathIsRefusedAtOnceSayingWhatItIs) {
  const testing_files::HangGuard guard;
  const testing_files::SpecialFiles files;
  for (const testing_files::SpecialPath& p : files.all()) {
    const std::string msg = error_of(p.path);
    EXPECT_THAT(msg, HasSubstr("test input '" + p.path + "': " + p.kind)) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  EXPECT_THAT(error_of(files.missing() + "/below"), HasSubstr("does not exist"));
  EXPECT_THAT(error_of(""), HasSubstr("does not exist"));
}

TEST(RegularFile, ASocketIsNamed) {
  TempDir dir("regular");
  const std::string path = dir.file("sock");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_THAT(error_of(path), HasSubstr("'" + path + "': is a socket"));
  ::close(fd);
}

TEST(RegularFile, PermissionDeniedIsNamed) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads every file";
  TempDir dir("regular");
  const std::string path = dir.file("locked");
  std::ofstream(path) << "x";
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  EXPECT_THAT(error_of(path), HasSubstr("'" + path + "': permission denied"));
}
