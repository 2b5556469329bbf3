// Checkpoint naming (latest_checkpoint); the atomic writer underneath saves is
// tested in test_atomic_file.cpp.
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
  touch(checkpoint_path(dir.path(), 200000000) + ".tmp.0123456789abcdef");  // interrupted write
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
