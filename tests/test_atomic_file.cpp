// The atomic writer under every save: old-or-new, never torn; exclusive
// temporaries (no planted file or symlink is followed); "no space" errors; and
// the clean-up of temporaries a killed writer left behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>

#include "lib/util/atomic_file.h"
#include "lib/util/temp_dir.h"
#include "tests/file_size_limit.h"

using namespace srkit;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

}  // namespace

TEST(AtomicFile, AbandonedWriteLeavesOldFileAndNoTemporary) {
  TempDir dir("atomic");
  const std::string path = dir.file("f");
  write_file_atomic(path, "old", 3);
  std::string tmp;
  try {
    AtomicFileWriter w(path);
    tmp = w.tmp_path();
    w.write("new content", 11);
    EXPECT_TRUE(fs::exists(tmp));
    EXPECT_TRUE(is_atomic_temporary(fs::path(tmp).filename().string())) << tmp;
    throw std::runtime_error("crash before commit");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(read_all(path), "old");
  EXPECT_EQ(names_in(dir.path()), std::set<std::string>{"f"});
}

TEST(AtomicFile, CommitReplacesAndRejectsReuse) {
  TempDir dir("atomic");
  const std::string path = dir.file("f");
  write_file_atomic(path, "old", 3);
  AtomicFileWriter w(path);
  w.write("new", 3);
  EXPECT_EQ(read_all(path), "old");  // invisible until commit
  w.commit();
  EXPECT_EQ(read_all(path), "new");
  EXPECT_EQ(names_in(dir.path()), std::set<std::string>{"f"});
  EXPECT_THROW(w.write("x", 1), std::logic_error);
  EXPECT_THROW(w.commit(), std::logic_error);
  EXPECT_EQ(read_all(path), "new");
}

TEST(AtomicFile, RenameFailureCleansUp) {
  TempDir dir("atomic");
  const std::string path = dir.file("d");
  fs::create_directory(path);
  fs::create_directory(path + "/child");  // rename onto a non-empty directory fails
  {
    AtomicFileWriter w(path);
    w.write("x", 1);
    EXPECT_THROW(w.commit(), std::runtime_error);
  }
  EXPECT_EQ(names_in(dir.path()), std::set<std::string>{"d"});
  EXPECT_TRUE(fs::is_directory(path + "/child"));
}

// A symlink planted where a fixed-name writer would put its temporary must not
// redirect the write: the victim keeps its content.
TEST(AtomicFile, PlantedSymlinkIsNeverFollowed) {
  TempDir dir("atomic");
  const std::string victim = dir.file("victim");
  std::ofstream(victim) << "precious";
  const std::string path = dir.file("ckpt");
  fs::create_symlink(victim, path + ".tmp");
  write_file_atomic(path, "data", 4);
  EXPECT_EQ(read_all(victim), "precious");
  EXPECT_EQ(read_all(path), "data");
  EXPECT_TRUE(fs::is_symlink(path + ".tmp"));

  // The final name itself a symlink: rename replaces the link, not its target.
  const std::string linked = dir.file("linked");
  fs::create_symlink(victim, linked);
  write_file_atomic(linked, "other", 5);
  EXPECT_EQ(read_all(victim), "precious");
  EXPECT_FALSE(fs::is_symlink(linked));
  EXPECT_EQ(read_all(linked), "other");
}

TEST(AtomicFile, ConcurrentWritersNeverShareATemporary) {
  TempDir dir("atomic");
  const std::string path = dir.file("f");
  AtomicFileWriter a(path), b(path);
  EXPECT_NE(a.tmp_path(), b.tmp_path());
  a.write("aaaa", 4);
  b.write("bb", 2);
  a.commit();
  EXPECT_EQ(read_all(path), "aaaa");
  b.commit();
  EXPECT_EQ(read_all(path), "bb");
  EXPECT_EQ(names_in(dir.path()), std::set<std::string>{"f"});
}

TEST(AtomicFile, FullDiskSaysNoSpaceAndKeepsTheOldFile) {
  TempDir dir("atomic");
  const std::string path = dir.file("f");
  write_file_atomic(path, "old", 3);
  const std::string big(1 << 16, 'x');
  std::string error;
  {
    testing_faults::ScopedFileSizeLimit limit(4096);
    try {
      write_file_atomic(path, big.data(), big.size());
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
  }
  EXPECT_THAT(error, HasSubstr("cannot write '" + path + "': no space"));
  EXPECT_EQ(read_all(path), "old");
  EXPECT_EQ(names_in(dir.path()), std::set<std::string>{"f"});
}

TEST(AtomicFile, CreationFailureNamesTheTarget) {
  TempDir dir("atomic");
  std::ofstream(dir.file("plain")) << "x";
  const std::string path = dir.file("plain") + "/f";  // a regular file where a directory should be
  try {
    write_file_atomic(path, "x", 1);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot create a file beside '" + path + "'"));
  }
}

TEST(AtomicFile, StaleTemporariesAreRecognisedAndRemoved) {
  EXPECT_TRUE(is_atomic_temporary("ckpt_00000010.safetensors.tmp.0123456789abcdef"));
  EXPECT_FALSE(is_atomic_temporary("ckpt_00000010.safetensors.tmp"));
  EXPECT_FALSE(is_atomic_temporary("ckpt.tmp.0123456789ABCDEF"));
  EXPECT_FALSE(is_atomic_temporary("ckpt.tmp.0123456789abcde"));
  EXPECT_FALSE(is_atomic_temporary(".tmp.0123456789abcdef"));
  TempDir dir("atomic");
  std::ofstream(dir.file("a.tmp.0123456789abcdef")) << "torn";
  std::ofstream(dir.file("a")) << "whole";
  std::ofstream(dir.file("notes.tmp")) << "user's";
  fs::create_directory(dir.file("b.tmp.fedcba9876543210"));  // not a file: kept
  EXPECT_EQ(remove_atomic_temporaries(dir.path()), 1);
  EXPECT_EQ(names_in(dir.path()),
            (std::set<std::string>{"a", "notes.tmp", "b.tmp.fedcba9876543210"}));
}

// ---- AtomicDirWriter: a folder of files replaced as one ----------------------

namespace {
void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }
}  // namespace

TEST(AtomicDir, CreatesTheFolderWithEveryFileAtOnce) {
  TempDir dir("atomicdir");
  const std::string out = dir.file("a/export");
  {
    AtomicDirWriter w(out);
    write_text(w.file("config.json"), "new config");
    write_text(w.file("model.safetensors"), "new weights");
    EXPECT_FALSE(fs::exists(out)) << "nothing visible before commit";
    w.commit();
  }
  EXPECT_EQ(read_all(out + "/config.json"), "new config");
  EXPECT_EQ(read_all(out + "/model.safetensors"), "new weights");
  EXPECT_EQ(names_in(dir.file("a")), std::set<std::string>{"export"}) << "no staging left";
}

TEST(AtomicDir, ReplacesTheOldVersionAndKeepsFilesItDoesNotWrite) {
  TempDir dir("atomicdir");
  const std::string out = dir.file("export");
  fs::create_directory(out);
  write_text(out + "/config.json", "old config");
  write_text(out + "/model.safetensors", "old weights");
  write_text(out + "/tokenizer.json", "kept");
  {
    AtomicDirWriter w(out);
    write_text(w.file("config.json"), "new config");
    write_text(w.file("model.safetensors"), "new weights");
    EXPECT_EQ(read_all(out + "/config.json"), "old config") << "the old version until commit";
    w.commit();
  }
  EXPECT_EQ(read_all(out + "/config.json"), "new config");
  EXPECT_EQ(read_all(out + "/model.safetensors"), "new weights");
  EXPECT_EQ(read_all(out + "/tokenizer.json"), "kept");
  EXPECT_EQ(names_in(dir.path()), std::set<std::string>{"export"}) << "no staging or old copy";
}

TEST(AtomicDir, AFailureBeforeCommitLeavesTheOldVersionWhole) {
  TempDir dir("atomicdir");
  const std::string out = dir.file("export");
  fs::create_directory(out);
  write_text(out + "/config.json", "old config");
  write_text(out + "/model.safetensors", "old weights");
  try {
    AtomicDirWriter w(out);
    write_text(w.file("model.safetensors"), "new weights");
    throw std::runtime_error("the config could not be written");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(read_all(out + "/config.json"), "old config");
  EXPECT_EQ(read_all(out + "/model.safetensors"), "old weights");
  EXPECT_EQ(names_in(dir.path()), std::set<std::string>{"export"});
  // A sub-folder is not replaced: refused at commit, the old version whole.
  fs::create_directory(out + "/sub");
  AtomicDirWriter w(out);
  write_text(w.file("config.json"), "new config");
  EXPECT_THAT(
      [&] {
        try {
          w.commit();
        } catch (const std::runtime_error& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr(out + "/sub"));
  EXPECT_EQ(read_all(out + "/config.json"), "old config");
}
