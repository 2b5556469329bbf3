// The charts the apps write, as a user runs them: sr-train --compare writes
// compare.svg beside compare.json (or <stem>.svg beside --json FILE) and
// sr-bench train --svg FILE; each parses as XML (the in-test checker, and
// python3's parser when python3 is installed), holds one series per strategy
// in every panel, and keeps its labels apart. A bad --svg path fails first.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/run_command.h"
#include "tests/test_paths.h"
#include "tests/test_svg_support.h"

namespace srkit::svg_testing {
namespace {

namespace fs = std::filesystem;

using Output = testing_process::CommandResult;

Output run(const std::string& command) { return testing_process::run_command(command); }

std::string app(const std::string& name) { return std::string(SRKIT_BIN_DIR) + "/" + name + " "; }

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The document's panels, in order.
std::vector<std::string> panels_of(const std::string& svg) {
  std::vector<std::string> out;
  const std::string open = "<g class=\"panel\">";
  for (size_t p = svg.find(open); p != std::string::npos;) {
    const size_t next = svg.find(open, p + 1);
    out.push_back(svg.substr(p, next == std::string::npos ? std::string::npos : next - p));
    p = next;
  }
  return out;
}

// Well-formed for the in-test checker and, when installed, for python3's parser.
void expect_parses(const fs::path& file) {
  EXPECT_EQ(xml_problem(slurp(file)), "") << file;
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) return;
  const Output py =
      run("python3 -c 'import sys, xml.etree.ElementTree as E; "
          "r = E.parse(sys.argv[1]).getroot(); assert r.tag.endswith(\"svg\"), r.tag' " +
          file.string());
  EXPECT_EQ(py.code, 0) << file << ": " << py.output;
}

const std::string kTiny =
    " --model tiny --batch 2 --seq-len 16 --synthetic-bytes 16384 --sample-tokens 0 -q --steps 4";

TEST(ChartsCli, CompareWritesCompareSvgBesideCompareJson) {
  const fs::path dir = testing_paths::fresh_dir("charts_cli", "compare");
  const std::vector<std::string> strategies = {"fp32", "bf16-sr:v=f32", "bf16"};
  const Output r = run(app("sr-train") + "--compare fp32,bf16-sr:v=f32,bf16 --eval-interval 2" +
                       kTiny + " --out " + dir.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("chart: " + (dir / "compare.svg").string()), std::string::npos)
      << r.output;
  ASSERT_TRUE(fs::exists(dir / "compare.json"));
  ASSERT_TRUE(fs::exists(dir / "compare.svg"));
  expect_parses(dir / "compare.svg");
  const std::string svg = slurp(dir / "compare.svg");
  const std::vector<std::string> panels = panels_of(svg);
  ASSERT_EQ(panels.size(), 3u) << "validation loss, training loss, memory";
  EXPECT_NE(panels[0].find(">validation loss</text>"), std::string::npos);
  EXPECT_EQ(count(panels[0], "<polyline class=\"series\""), 3u);
  EXPECT_EQ(count(panels[1], "<polyline class=\"series\""), 3u);
  EXPECT_EQ(count(panels[1], "<polyline class=\"series faint\""), 3u);
  EXPECT_EQ(count(panels[2], "<g class=\"series\""), 6u) << "memory categories";
  for (const std::string& s : strategies) {
    for (size_t p = 0; p < 2; ++p) {
      EXPECT_NE(panels[p].find("<title>" + s + "</title>"), std::string::npos) << p << " " << s;
    }
    EXPECT_NE(panels[2].find(">" + s + "</text>"), std::string::npos) << s;
  }
  // Evaluations at steps 2 and 4: two points, step 4 at 4 x 2 x 16 tokens.
  const size_t val = panels[0].find("<polyline class=\"series\"");
  const std::string tag = panels[0].substr(val, panels[0].find('>', val) - val);
  EXPECT_EQ(count(attribute(tag, "points"), ","), 2u) << tag;
  EXPECT_NE(panels[0].find(">120<"), std::string::npos) << "tokens axis reaches 128";
  EXPECT_TRUE(layout_problems(svg).empty());
}

TEST(ChartsCli, CompareChartFollowsJsonFile) {
  const fs::path dir = testing_paths::fresh_dir("charts_cli", "compare_json");
  fs::create_directories(dir / "report");
  const Output r =
      run(app("sr-train") + "--compare bf16,bf16-sr" + kTiny + " --out " + (dir / "runs").string() +
          " --json " + (dir / "report" / "cmp.json").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir / "report" / "cmp.json"));
  ASSERT_TRUE(fs::exists(dir / "report" / "cmp.svg"));
  EXPECT_FALSE(fs::exists(dir / "runs" / "compare.svg"));
  expect_parses(dir / "report" / "cmp.svg");
  const std::string svg = slurp(dir / "report" / "cmp.svg");
  EXPECT_EQ(count(svg, "<polyline class=\"series faint\""), 2u);
  EXPECT_NE(svg.find("<title>bf16-sr</title>"), std::string::npos);
}

TEST(ChartsCli, BenchTrainSvgHasOneBarPerStrategyInEachPanel) {
  const fs::path dir = testing_paths::fresh_dir("charts_cli", "bench");
  const fs::path file = dir / "bench.svg";
  const Output r = run(app("sr-bench") +
                       "train --models tiny --batches 1,2 --seq-len 16 --steps 1 --warmup 0 "
                       "--threads 2 --strategies mixed,bf16-sr --svg " +
                       file.string());
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_TRUE(fs::exists(file));
  expect_parses(file);
  const std::string svg = slurp(file);
  const std::vector<std::string> panels = panels_of(svg);
  ASSERT_EQ(panels.size(), 2u) << "tok/s, peak memory";
  for (const std::string& p : panels) {
    EXPECT_EQ(count(p, "<g class=\"series\""), 2u);
    EXPECT_EQ(count(p, "<rect x="), 4u + 1u) << "2 cells x 2 strategies + the frame";
    EXPECT_NE(p.find("<title>bf16-sr</title>"), std::string::npos);
    EXPECT_NE(p.find(">tiny B=2 T=16</text>"), std::string::npos);
  }
  EXPECT_TRUE(layout_problems(svg).empty());
}

TEST(ChartsCli, BadSvgPathIsRefusedBeforeAnyCellRuns) {
  const Output r = run(app("sr-bench") + "train --models tiny --svg /nonexistent-dir/x.svg");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(count(r.output, "\n"), 1u) << r.output;
  EXPECT_NE(
      r.output.find("--svg: /nonexistent-dir/x.svg: directory /nonexistent-dir does not exist"),
      std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace srkit::svg_testing
