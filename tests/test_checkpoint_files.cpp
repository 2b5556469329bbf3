// Checkpoint naming (latest_checkpoint) and the atomic file writer underneath saves.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "lib/checkpoint/checkpoint_dir.h"
#include "lib/util/atomic_file.h"
#include "lib/util/temp_dir.h"

using namespace srkit;
namespace fs = std::filesystem;

namespace {
void touch(const std::string& path) { std::ofstream(path) << "x"; }
std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
}  // namespace

TEST(CheckpointDir, PathNaming) {
  EXPECT_EQ(checkpoint_path("run", 1000), "run/ckpt_00001000.safetensors");
  EXPECT_EQ(checkpoint_path("run/", 0), "run/ckpt_00000000.safetensors");
  EXPECT_EQ(checkpoint_path("r", 123456789), "r/ckpt_123456789.safetensors");
}

TEST(CheckpointDir, LatestIsTheHighestStepNotTheLastName) {
  TempDir dir("ckpt");
  EXPECT_EQ(latest_checkpoint(dir.path()), "");
  touch(checkpoint_path(dir.path(), 500));
  touch(checkpoint_path(dir.path(), 99999999));
  touch(checkpoint_path(dir.path(), 100000000));  // 9 digits: sorts first by name, is latest
  touch(checkpoint_path(dir.path(), 200000000) + ".tmp");  // interrupted write
  touch(dir.file("ckpt_.safetensors"));
  touch(dir.file("ckpt_12x.safetensors"));
  touch(dir.file("ckpt_-5.safetensors"));
  touch(dir.file("other_300000000.safetensors"));
  fs::create_directory(dir.file("ckpt_400000000.safetensors"));  // not a file
  EXPECT_EQ(latest_checkpoint(dir.path()), checkpoint_path(dir.path(), 100000000));
}

TEST(CheckpointDir, MissingDirectoryIsAnError) {
  TempDir dir("ckpt");
  try {
    latest_checkpoint(dir.file("nope"));
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr(dir.file("nope")));
  }
}

TEST(AtomicFile, AbandonedWriteLeavesOldFileAndNoTmp) {
  TempDir dir("atomic");
  const std::string path = dir.file("f");
  write_file_atomic(path, "old", 3);
  try {
    AtomicFileWriter w(path);
    w.write("new content", 11);
    EXPECT_TRUE(fs::exists(path + ".tmp"));
    throw std::runtime_error("crash before commit");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(read_all(path), "old");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
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
  EXPECT_FALSE(fs::exists(path + ".tmp"));
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
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_TRUE(fs::is_directory(path + "/child"));
}
