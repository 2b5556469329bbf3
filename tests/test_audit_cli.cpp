// sr-audit's accumulate, rng, run and plot subcommands as users run them: bad
// input exits 2 with one line on stderr, --json writes parseable JSON with the
// expected content, --svg writes an SVG with the expected number of series,
// and output is deterministic under a fixed seed.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

#include "lib/util/temp_dir.h"
#include "tests/run_command.h"
#include "tests/special_files.h"

namespace srkit {
namespace {

struct ProcessResult {
  int code;
  std::string out;
};

// Runs sr-audit with `args`; its stdout, or its stderr when `stderr_only`.
ProcessResult sr_audit(const std::string& args, bool stderr_only = false) {
  const srkit::testing_process::SplitResult r =
      srkit::testing_process::run_command_split(std::string(SRKIT_BIN_DIR) + "/sr-audit " + args);
  return ProcessResult{r.code, stderr_only ? r.err : r.out};
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// A two-step log as sr-train writes it.
std::string write_log(const TempDir& dir, const std::string& name, const std::string& strategy) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path) << "{\"type\":\"config\",\"config\":{\"strategy\":\"" << strategy << "\"}}\n"
                      << "{\"type\":\"step\",\"step\":1,\"loss\":5.0,\"erased_frac\":0.1}\n"
                      << "{\"type\":\"step\",\"step\":2,\"loss\":4.5,\"erased_frac\":0.7}\n"
                      << "{\"type\":\"eval\",\"step\":2,\"val_loss\":4.6}\n"
                      << "{\"type\":\"shadow\",\"step\":2,\"mean_abs_ulps\":1.5,"
                         "\"max_abs_ulps\":4,\"rel_drift\":0.01}\n";
  return path;
}

TEST(SrAuditCli, BadInputExitsTwoWithOneLine) {
  TempDir dir("auditcli");
  const std::string bad_log = dir.path() + "/bad.jsonl";
  std::ofstream(bad_log) << "{\"type\":\"step\",\"step\":1,\"loss\":2}\nnot json\n";
  const std::string empty_log = dir.path() + "/empty.jsonl";
  std::ofstream(empty_log) << "";
  const std::string overflow_log = dir.path() + "/overflow.jsonl";
  std::ofstream(overflow_log) << "{\"type\":\"step\",\"step\":1,\"loss\":1e309}\n";
  const std::string negative_step_log = dir.path() + "/negative.jsonl";
  std::ofstream(negative_step_log) << "{\"type\":\"step\",\"step\":-5,\"loss\":1}\n";
  const testing_files::HangGuard guard;
  const testing_files::SpecialFiles files;
  const std::string cases[] = {
      "accumulate -n 0",
      "accumulate --format fp7",
      "accumulate --format bf16,",
      "accumulate --repeats 0",
      "accumulate --delta 1e-60",
      "accumulate --format e4m3 --ratio 10 -n 1e5",
      "accumulate --sweep --ratio-min 1 --ratio-max 1",
      "accumulate --sweep --per-decade 0",
      "rng -n 0",
      "rng -n 10",
      "rng --purpose 65535",
      "run " + dir.path() + "/missing.jsonl",
      "run " + bad_log,
      "run " + empty_log,
      "run " + bad_log + " --windows 0",
      "plot " + bad_log,
      "plot " + dir.path() + "/missing.jsonl",
      "run " + overflow_log,
      "run " + negative_step_log,
      "run " + files.fifo(),
      "run " + files.directory(),
      "plot " + files.fifo(),
      "plot",
      "run",
      "frobnicate",  // an unknown subcommand, named with the choices
  };
  for (const std::string& args : cases) {
    const ProcessResult r = sr_audit(args, /*stderr_only=*/true);
    EXPECT_EQ(r.code, 2) << args;
    ASSERT_FALSE(r.out.empty()) << args;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line for '" << args << "': " << r.out;
  }
  const ProcessResult unknown = sr_audit("frobnicate", /*stderr_only=*/true);
  EXPECT_NE(unknown.out.find("unknown subcommand 'frobnicate'; expected one of: cast, accumulate"),
            std::string::npos)
      << unknown.out;
}

// A log whose writer was killed mid-line is still read, with one warning on
// stderr naming the file and line.
TEST(SrAuditCli, ALogCutOffMidLineIsReadWithAWarning) {
  TempDir dir("auditcli");
  const std::string path = dir.path() + "/cut.jsonl";
  std::ofstream(path) << "{\"type\":\"step\",\"step\":1,\"loss\":5.0}\n"
                      << "{\"type\":\"step\",\"step\":2,\"loss\":4.5}\n"
                      << "{\"type\":\"step\",\"st";
  for (const std::string& command : {std::string("run "), "plot --svg " + dir.path() + "/l.svg "}) {
    const ProcessResult r = sr_audit(command + path, /*stderr_only=*/true);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(r.out, "sr-audit: warning: " + path + ":3: last line incomplete, ignored\n");
  }
  EXPECT_NE(sr_audit("run --windows 1 " + path).out.find("| 1-2 |"), std::string::npos);
}

TEST(SrAuditCli, AccumulateJsonSvgAndDeterminism) {
  TempDir dir("auditcli");
  const std::string args = "accumulate --format bf16,fp16 -n 300 --repeats 4 --seed 5 --json " +
                           dir.path() + "/a.json --svg " + dir.path() + "/a.svg";
  const ProcessResult a = sr_audit(args);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("| bf16 | RN |"), std::string::npos) << a.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(dir.path() + "/a.json"));
  ASSERT_EQ(j.at("runs").size(), 2u);
  EXPECT_EQ(j["runs"][0]["methods"].size(), 4u);
  EXPECT_EQ(j["runs"][0]["methods"][1]["stall_step"], 1);  // ratio 0.1 < 1/2
  const std::string svg = slurp(dir.path() + "/a.svg");
  EXPECT_EQ(count(svg, "<polyline class=\"series\""), 4u);  // fp32, RN, SR, Kahan
  EXPECT_EQ(svg.rfind("</svg>\n"), svg.size() - 7);
  EXPECT_EQ(sr_audit(args).out, a.out);
  EXPECT_EQ(slurp(dir.path() + "/a.json"), j.dump(2) + "\n");
  const ProcessResult sweep = sr_audit(
      "accumulate --sweep --format e5m2 -n 100 --repeats 2 "
      "--per-decade 1 --svg " +
      dir.path() + "/s.svg");
  ASSERT_EQ(sweep.code, 0);
  EXPECT_EQ(count(sweep.out, "| e5m2 |"), 5u) << sweep.out;  // 1e-3 .. 10
  EXPECT_EQ(count(slurp(dir.path() + "/s.svg"), "<polyline class=\"series\""), 3u);
}

TEST(SrAuditCli, RngJsonAndHistogram) {
  TempDir dir("auditcli");
  const ProcessResult r =
      sr_audit("rng -n 1e5 --json " + dir.path() + "/r.json --svg " + dir.path() + "/r.svg");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("verdict: all tests pass"), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(slurp(dir.path() + "/r.json"));
  EXPECT_EQ(j.at("tests").size(), 6u);
  EXPECT_TRUE(j.at("pass").get<bool>());
  EXPECT_EQ(count(slurp(dir.path() + "/r.svg"), "<g class=\"series\""), 2u);
}

TEST(SrAuditCli, RunAndPlotReadLogs) {
  TempDir dir("auditcli");
  const std::string a = write_log(dir, "a.jsonl", "bf16"), b = write_log(dir, "b.jsonl", "bf16-sr");
  const ProcessResult r = sr_audit("run " + a + " " + b + " --windows 2 --json " + dir.path() +
                                   "/run.json --svg " + dir.path() + "/run.svg");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("weights stagnate: 70.0%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("## Shadow-FP32 drift"), std::string::npos);
  EXPECT_NE(r.out.find("| bf16-sr | 2 | 1.5 | 4 | 0.01 |"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(dir.path() + "/run.json"));
  EXPECT_EQ(j.at("runs").size(), 2u);
  EXPECT_EQ(j["runs"][1]["strategy"], "bf16-sr");
  EXPECT_EQ(count(slurp(dir.path() + "/run.svg"), "<polyline class=\"series\""), 2u);

  const ProcessResult p = sr_audit("plot " + a + " " + b + " --svg " + dir.path() +
                                   "/loss.svg --json " + dir.path() + "/loss.json");
  ASSERT_EQ(p.code, 0) << p.out;
  const std::string svg = slurp(dir.path() + "/loss.svg");
  EXPECT_EQ(count(svg, "<polyline class=\"series\""), 4u);  // loss + val per run
  EXPECT_NE(svg.find("bf16-sr val"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(slurp(dir.path() + "/loss.json"))["runs"][0]["loss"].size(), 2u);
}

// --svg-groups: per log two panels (erased fraction, update/weight ratio) with
// one series per tensor group; a log without per-group telemetry exits 2
// before any output.
TEST(SrAuditCli, RunDrawsTelemetryPerTensorGroup) {
  TempDir dir("auditcli");
  const std::string path = dir.path() + "/g.jsonl";
  {
    std::ofstream log(path);
    log << "{\"type\":\"config\",\"config\":{\"strategy\":\"bf16\"}}\n";
    for (int step = 1; step <= 3; ++step) {
      log << "{\"type\":\"step\",\"step\":" << step << ",\"loss\":4,\"groups\":{";
      const char* groups[] = {"embeddings", "attention", "mlp", "layernorm", "biases"};
      for (int g = 0; g < 5; ++g) {
        log << (g ? "," : "") << "\"" << groups[g] << "\":{\"erased_frac\":" << 0.1 * (g + 1)
            << ",\"update_weight_ratio\":" << 1e-4 * (g + step) << "}";
      }
      log << "}}\n";
    }
  }
  const std::string svg_path = dir.path() + "/groups.svg";
  const ProcessResult r = sr_audit("run " + path + " --svg-groups " + svg_path);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string svg = slurp(svg_path);
  EXPECT_EQ(count(svg, "<polyline class=\"series\""), 10u) << "2 panels x 5 groups";
  for (const char* g : {"embeddings", "attention", "mlp", "layernorm", "biases"}) {
    EXPECT_EQ(count(svg, std::string("<title>") + g + "</title>"), 2u) << g;
  }

  const std::string old = write_log(dir, "old.jsonl", "bf16");
  const ProcessResult bad =
      sr_audit("run " + old + " --svg-groups " + dir.path() + "/no.svg", /*stderr_only=*/true);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("old.jsonl: no per-group telemetry"), std::string::npos) << bad.out;
  EXPECT_EQ(count(bad.out, "\n"), 1u) << bad.out;
  EXPECT_FALSE(std::ifstream(dir.path() + "/no.svg").good());
}

}  // namespace
}  // namespace srkit
