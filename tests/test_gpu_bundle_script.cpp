// The GPU bundle's run.sh (bench/gpu/bundle_run.sh) where there is no GPU: it
// must stop at once with exit code 2, one line naming why, and a summary that
// says so (a bundle run by mistake on a build machine must not look like a pass).
#include <gtest/gtest.h>

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

}  // namespace
