// The GPU bundle's run.sh (bench/gpu/bundle_run.sh) where there is no GPU: it
// must stop at once with exit code 2, one line naming why, and a summary that
// says so (a bundle run by mistake on a build machine must not look like a pass).
// And its summary rows (bench/gpu/bundle_report.py) from fixture files: llm.c's
// step lines against srkit's cells, and the equal-memory choices.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/run_command.h"
#include "tests/test_paths.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int code;
  std::string output;  // stdout + stderr
};

Result run(const std::string& cmd) {
  const srkit::testing_process::CommandResult r = srkit::testing_process::run_command(cmd);
  return {r.code, r.output};
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const std::string kScript = std::string(SRKIT_SOURCE_DIR) + "/bench/gpu/bundle_run.sh";

// A driver that answers but sees no device (what nvidia-smi prints on a node
// whose driver is not loaded): first on PATH, so this runs the same everywhere.
TEST(GpuBundleScript, DriverWithoutADeviceStopsNamingWhy) {
  const fs::path dir = srkit::testing_paths::fresh_dir("bundle", "no_device");
  fs::create_directories(dir / "fakebin");
  std::ofstream(dir / "fakebin" / "nvidia-smi")
      << "#!/bin/sh\necho 'NVIDIA-SMI has failed because it couldn'\"'\"'t communicate with the "
         "NVIDIA driver.'\nexit 9\n";
  fs::permissions(dir / "fakebin" / "nvidia-smi", fs::perms::owner_all);
  const Result r = run("PATH=" + (dir / "fakebin").string() + ":$PATH bash " + kScript + " " +
                       (dir / "results").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("srkit gpu bundle: no GPU: nvidia-smi lists no device"),
            std::string::npos)
      << r.output;
  const std::string summary = slurp(dir / "results" / "summary.md");
  EXPECT_NE(summary.find("| stopped | no GPU"), std::string::npos) << summary;
  EXPECT_TRUE(fs::exists(dir / "results" / "inventory.txt"));
}

// No driver at all (the build machine): nvidia-smi is not found.
TEST(GpuBundleScript, NoDriverStopsNamingWhy) {
  if (run("command -v nvidia-smi").code == 0) {
    GTEST_SKIP() << "this machine has nvidia-smi; the no-driver path needs one without";
  }
  const fs::path dir = srkit::testing_paths::fresh_dir("bundle", "no_driver");
  const Result r = run("bash " + kScript + " " + (dir / "results").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("srkit gpu bundle: no GPU: nvidia-smi not found"), std::string::npos)
      << r.output;
}

// build_llmc.sh on a folder without llm.c: exit 1 and BUILD-FAILED.txt names
// the folder and what it expected (the summary quotes that line on the node).
TEST(GpuBundleScript, LlmcBuildWithoutItsSourceSaysWhy) {
  const fs::path dir = srkit::testing_paths::fresh_dir("bundle", "llmc_no_source");
  fs::create_directories(dir / "empty");
  const Result r = run("bash " + std::string(SRKIT_SOURCE_DIR) + "/bench/gpu/llmc/build_llmc.sh " +
                       (dir / "empty").string() + " " + (dir / "out").string());
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string why = slurp(dir / "out" / "BUILD-FAILED.txt");
  EXPECT_NE(why.find((dir / "empty").string() + " holds no llm.c source"), std::string::npos)
      << why;
  EXPECT_FALSE(fs::exists(dir / "out" / "train_gpt2cu"));
}

const std::string kReport = std::string(SRKIT_SOURCE_DIR) + "/bench/gpu/bundle_report.py";

bool have_python() { return run("command -v python3").code == 0; }

// llm.c's step line as train_gpt2.cu prints it.
std::string llmc_step(int step, int of, double ms) {
  char line[256];
  std::snprintf(line, sizeof line,
                "step %4d/%d | loss 10.912345 (+0.00z)| norm 8.1234 (+0.00z)| lr 3.00e-04 | "
                "%.2f ms | 30.1%% bf16 MFU | 123456 tok/s\n",
                step, of, ms);
  return line;
}

// srkit's train JSON with bf16-sr and mixed cells at the given tok/s.
void write_srkit_cells(const fs::path& p, double sr_tok_s, double mixed_tok_s) {
  std::ofstream(p) << R"({"cells": [
    {"model": "gpt2-124m", "strategy": "bf16-sr", "status": "ok", "tokens_per_s": )"
                   << sr_tok_s << R"(, "ms_per_step": {"median": 40.96}},
    {"model": "gpt2-124m", "strategy": "mixed", "status": "ok", "tokens_per_s": )"
                   << mixed_tok_s << R"(, "ms_per_step": {"median": 54.6}}]})";
}

// The first five steps (start-up) are left out; the median of the rest times
// llm.c; each pair is srkit's tok/s over llm.c's at the same tokens per step.
TEST(GpuBundleReport, SrkitOverLlmcFromTheStepLines) {
  if (!have_python()) GTEST_SKIP() << "python3 not found: the bundle's report needs it";
  const fs::path dir = srkit::testing_paths::fresh_dir("bundle", "llmc_ratio");
  write_srkit_cells(dir / "srkit.json", 400000, 300000);
  {
    std::ofstream w0(dir / "w0.log"), w1(dir / "w1.log");
    w0 << "+-----------------------+\n| llm.c header |\n";
    for (int s = 1; s <= 12; ++s) {
      w0 << llmc_step(s, 12, s <= 5 ? 900.0 : (s == 9 ? 80.0 : 32.0));
      w1 << llmc_step(s, 12, s <= 5 ? 900.0 : 40.96);
    }
    w0 << "srkit bundle: train_gpt2cu -w 0 exited with 0\n";
  }
  const Result r = run("python3 " + kReport + " llmc " + (dir / "srkit.json").string() + " " +
                       (dir / "w0.log").string() + " " + (dir / "w1.log").string() +
                       " 16384 --markdown " + (dir / "train.md").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("| srkit / llm.c tok/s (gpt2-124m, B=16, T=1024) | "
                          "bf16-sr / llm.c -w 0: 0.78x (400000 vs 512000 tok/s); "
                          "mixed / llm.c -w 1: 0.75x (300000 vs 400000 tok/s) |"),
            std::string::npos)
      << r.output;
  const std::string md = slurp(dir / "train.md");
  EXPECT_NE(md.find("| bf16-sr | 400000 | 41.0 | -w 0"), std::string::npos) << md;
  EXPECT_NE(md.find("32.0 (median of 7) | 0.78x |"), std::string::npos) << md;
}

// A run of llm.c that died (or never started) is not compared and the row says
// why, quoting its log's last line; the other pair still is.
TEST(GpuBundleReport, AFailedLlmcRunSaysWhyAndTheOtherPairStands) {
  if (!have_python()) GTEST_SKIP() << "python3 not found: the bundle's report needs it";
  const fs::path dir = srkit::testing_paths::fresh_dir("bundle", "llmc_failed");
  write_srkit_cells(dir / "srkit.json", 400000, 300000);
  {
    std::ofstream w0(dir / "w0.log"), w1(dir / "w1.log");
    for (int s = 1; s <= 8; ++s) w0 << llmc_step(s, 8, 40.96);
    w1 << "[CUDA ERROR] at file llmc/cuda_utils.cuh:42: out of memory\n"
       << "srkit bundle: train_gpt2cu -w 1 exited with 1\n";
  }
  const Result r = run("python3 " + kReport + " llmc " + (dir / "srkit.json").string() + " " +
                       (dir / "w0.log").string() + " " + (dir / "w1.log").string() + " 16384");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("bf16-sr / llm.c -w 0: 1.00x (400000 vs 400000 tok/s)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("mixed vs llm.c -w 1: not compared (llm.c -w 1: 0 step lines, too few "
                          "to time (srkit bundle: train_gpt2cu -w 1 exited with 1))"),
            std::string::npos)
      << r.output;
  // A missing srkit cell is named too.
  const Result missing =
      run("python3 " + kReport + " llmc " + (dir / "none.json").string() + " " +
          (dir / "w0.log").string() + " " + (dir / "w1.log").string() + " 16384");
  EXPECT_NE(missing.output.find("bf16-sr vs llm.c -w 0: not compared (srkit bf16-sr: no cell)"),
            std::string::npos)
      << missing.output;
}

// One row per model of the equal-memory search: the chosen shape and tok/s of
// each strategy, or what a strategy that does not fit would need.
TEST(GpuBundleReport, EqualMemoryRowPerModel) {
  if (!have_python()) GTEST_SKIP() << "python3 not found: the bundle's report needs it";
  const fs::path dir = srkit::testing_paths::fresh_dir("bundle", "budget_rows");
  std::ofstream(dir / "b.json") << R"({"budget_bytes": 85899345920, "tokens_per_step": 16384,
    "choices": [
      {"model": "neo-6.7b", "strategy": "mixed", "seq_len": 2048, "least_bytes": 107374182400,
       "chosen": null, "vs_mixed": null, "vs_amp": null, "candidates": []},
      {"model": "neo-6.7b", "strategy": "bf16-sr", "seq_len": 2048, "least_bytes": 53687091200,
       "chosen": 1, "vs_mixed": null, "vs_amp": 1.5,
       "candidates": [{"batch": 1, "grad_accum": 8, "recompute": false, "cell": null},
                      {"batch": 2, "grad_accum": 4, "recompute": true,
                       "cell": {"tokens_per_s": 1234.4}}]}]})";
  const Result r = run("python3 " + kReport + " budget " + (dir / "b.json").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("| equal memory: neo-6.7b, T=2048, 16384 tok/step, 80.0 GiB | "
                          "mixed does not fit (needs 100.0 GiB); "
                          "bf16-sr 2x4 +recompute 1234 tok/s (1.50x amp, - mixed) |"),
            std::string::npos)
      << r.output;
}

}  // namespace
