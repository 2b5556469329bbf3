// A resume refuses another config, naming every differing field, unless the
// user overrides those fields by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "lib/train/resume_check.h"
#include "lib/train/train_config.h"

using namespace srkit;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

nlohmann::json config_json(const TrainConfig& c, int world = 1) {
  nlohmann::json j = c.to_json(world);
  j["data_tokens"] = 1000;
  j["data_checksum"] = "00000000000000aa";
  return j;
}

std::string error_of(const nlohmann::json& saved, const nlohmann::json& now,
                     const std::vector<std::string>& overrides = {}) {
  try {
    check_resume_config("ckpt.safetensors", saved, now, overrides);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ResumeCheck, SameConfigPasses) {
  TrainConfig c;
  EXPECT_EQ(error_of(config_json(c), config_json(c)), "");
}

TEST(ResumeCheck, DifferentLrBatchAndDataAreNamed) {
  TrainConfig a, b;
  b.lr = 3e-3f;
  b.batch = 16;
  nlohmann::json now = config_json(b);
  now["data_checksum"] = "00000000000000bb";
  EXPECT_THAT(
      resume_config_differences(config_json(a), now, {}),
      ElementsAre(HasSubstr("data (checkpoint"), HasSubstr("batch (checkpoint 8, this run 16)"),
                  HasSubstr("lr (checkpoint")));
  const std::string e = error_of(config_json(a), now);
  EXPECT_THAT(e, HasSubstr("--resume ckpt.safetensors"));
  EXPECT_THAT(e, HasSubstr("--resume-override data,batch,lr"));
}

TEST(ResumeCheck, OverridesAcceptNamedChangesOnly) {
  TrainConfig a, b;
  b.lr = 3e-3f;
  b.steps = 400;
  EXPECT_EQ(error_of(config_json(a), config_json(b), {"lr", "steps"}), "");
  EXPECT_THAT(error_of(config_json(a), config_json(b), {"lr"}),
              HasSubstr("steps (checkpoint 200, this run 400)"));
}

TEST(ResumeCheck, SameGlobalBatchOnAnotherWorldSizeIsTheSameRun) {
  TrainConfig two_ranks, one_rank;
  one_rank.grad_accum = 2;
  EXPECT_EQ(error_of(config_json(two_ranks, 2), config_json(one_rank, 1)), "");
  EXPECT_THAT(error_of(config_json(two_ranks, 2), config_json(two_ranks, 1)),
              HasSubstr("batch (checkpoint 16, this run 8)"));
}

TEST(ResumeCheck, OutputsCadenceThreadsAndDeviceMayDiffer) {
  TrainConfig a, b;
  b.out_dir = "elsewhere";
  b.eval_interval = 7;
  b.log_interval = 3;
  b.ckpt_interval = 9;
  b.threads = 1;
  b.device = "cuda";
  b.data = "another/path/to/the/same.txt";  // the content decides, not the path
  EXPECT_EQ(error_of(config_json(a), config_json(b)), "");
}

TEST(ResumeCheck, OlderCheckpointsWithoutAFieldAreNotRefusedForIt) {
  TrainConfig a;
  nlohmann::json saved = config_json(a);
  saved.erase("data_checksum");
  saved.erase("lr");
  saved["batch"] = "malformed";
  nlohmann::json now = config_json(a);
  now["lr"] = 1.0;
  EXPECT_EQ(error_of(saved, now), "");
}

TEST(ResumeCheck, UnknownOverrideNamesAreRejected) {
  EXPECT_NO_THROW(check_resume_override_names({"lr", "steps", "data"}));
  try {
    check_resume_override_names({"learning-rate"});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("--resume-override: unknown field 'learning-rate'"));
  }
  TrainConfig c;
  c.resume_overrides = {"lr"};
  EXPECT_THROW(c.validate(), std::invalid_argument);  // without --resume
}
