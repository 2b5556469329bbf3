// Provenance: every run's log header (and checkpoint) and --version record the
// srkit version and commit, the flags that change numerics, and the hardware.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/gemm_bf16_path.h"
#include "lib/train/checkpoint_io.h"
#include "lib/util/build_info.h"
#include "tests/run_command.h"
#include "tests/test_paths.h"

using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

std::string run(const std::string& args) {
  return srkit::testing_process::run_command(std::string(SRKIT_BIN_DIR) + "/sr-train " + args)
      .output;
}

bool built_from_git() { return fs::exists(fs::path(SRKIT_SOURCE_DIR) / ".git"); }

}  // namespace

TEST(Provenance, SimdLevelIsTheWidestListedFlag) {
  EXPECT_EQ(srkit::simd_level_from_flags("fpu sse2 avx avx2 fma"), "avx2");
  EXPECT_EQ(srkit::simd_level_from_flags("avx2 avx512f avx512bw"), "avx512f");
  EXPECT_EQ(srkit::simd_level_from_flags("avx2 avx512f avx512_bf16"), "avx512_bf16");
  EXPECT_EQ(srkit::simd_level_from_flags("avx512f avx512_bf16 amx_bf16 amx_tile"), "amx_bf16");
  EXPECT_EQ(srkit::simd_level_from_flags("sse2 avx512fx"), "baseline");  // whole words only
}

TEST(Provenance, BuildFactsNameTheNumericsFlagsAndTheCommit) {
  const nlohmann::json b = srkit::build_facts();
  EXPECT_EQ(b.at("version"), SRKIT_VERSION);
  EXPECT_THAT(b.at("numerics_flags").get<std::string>(), HasSubstr("-ffp-contract=off"));
  EXPECT_THAT(b.at("arch_flags").get<std::string>(), HasSubstr("-march="));
  EXPECT_FALSE(b.at("build_type").get<std::string>().empty());
  EXPECT_TRUE(b.at("cuda").contains("enabled"));
  if (built_from_git()) {
    const std::string commit = b.at("git_commit").get<std::string>();
    EXPECT_TRUE(commit.size() == 40 &&
                commit.find_first_not_of("0123456789abcdef") == std::string::npos)
        << b.dump();
  }
  const nlohmann::json h = srkit::host_facts();
  EXPECT_FALSE(h.at("cpu_model").get<std::string>().empty());
  EXPECT_GT(h.at("logical_cpus").get<int>(), 0);
  EXPECT_EQ(h.at("cpu_isa"), srkit::cpu::cpu_isa_name(srkit::cpu::cpu_isa()));
  EXPECT_EQ(h.at("bf16_gemm"), srkit::cpu::bf16_gemm_path_name(srkit::cpu::bf16_gemm_path()));
}

TEST(Provenance, VersionPrintsTheBuildFacts) {
  const std::string out = run("--version");
  EXPECT_THAT(out, HasSubstr(std::string("sr-train ") + SRKIT_VERSION));
  EXPECT_THAT(out, HasSubstr("numerics_flags: -ffp-contract=off"));
  EXPECT_THAT(out, HasSubstr("host cpu_model: "));
  if (built_from_git()) {
    EXPECT_THAT(out, HasSubstr("git_commit: "));
  }
}

TEST(Provenance, AnUnknownBf16GemmPathIsAOneLineError) {
  const auto r = srkit::testing_process::run_command(
      "SRKIT_BF16_GEMM=fastest " + std::string(SRKIT_BIN_DIR) + "/sr-train --version");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("SRKIT_BF16_GEMM='fastest' is not a bf16 GEMM path"));
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST(Provenance, AnUnknownCpuIsaIsAOneLineErrorInEveryTool) {
  for (const char* tool : {"sr-train --version", "sr-bench train", "sr-audit cast"}) {
    const auto r = srkit::testing_process::run_command("SRKIT_CPU_ISA=sse4 " +
                                                       std::string(SRKIT_BIN_DIR) + "/" + tool);
    EXPECT_EQ(r.code, 2) << tool;
    EXPECT_THAT(r.output, HasSubstr("SRKIT_CPU_ISA='sse4' is not an instruction set")) << tool;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << tool << ": " << r.output;
  }
}

TEST(Provenance, TheLogHeaderRecordsBuildHostBackendAndConfig) {
  const fs::path dir = srkit::testing_paths::fresh_dir("provenance", "log");
  run("--model tiny --batch 2 --seq-len 16 --synthetic-bytes 16384 --sample-tokens 0 -q "
      "--steps 2 --threads 1 --out " +
      dir.string());
  std::ifstream in(dir / "bf16-sr.jsonl");
  std::string first;
  ASSERT_TRUE(std::getline(in, first));
  const nlohmann::json header = nlohmann::json::parse(first);
  ASSERT_EQ(header.at("type"), "config");
  const nlohmann::json& p = header.at("provenance");
  EXPECT_EQ(p.at("build"), srkit::build_facts());
  EXPECT_EQ(p.at("host").at("openmp_threads"), 1);  // the run's --threads
  EXPECT_THAT(p.at("backend").get<std::string>(), HasSubstr("CPU"));
  EXPECT_EQ(p.at("world_size"), 1);
  EXPECT_EQ(header.at("config").at("seq_len"), 16);

  // The checkpoint carries the same record.
  const srkit::CheckpointInfo info =
      srkit::read_checkpoint_info(srkit::resolve_checkpoint((dir / "ckpt-bf16-sr").string()));
  EXPECT_EQ(info.provenance, p);
}
