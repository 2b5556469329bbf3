// Per-tensor-group telemetry read back from sr-train logs (the step records'
// optional "groups") and drawn by `sr-audit run --svg-groups`: the groups are
// parsed, bad ones are one-line errors naming file, line and group, a log
// without them is refused for the chart, and the chart has two panels per log
// with one series per group (svg::render_column).
#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>
#include <string>

#include "lib/audit/run_log.h"
#include "lib/charts/group_charts.h"
#include "lib/util/svg.h"
#include "lib/util/temp_dir.h"

namespace srkit::audit {
namespace {

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

std::string group(const std::string& name, double erased, double ratio) {
  return "\"" + name + "\":{\"erased_frac\":" + std::to_string(erased) +
         ",\"update_weight_ratio\":" + std::to_string(ratio) + "}";
}

// Three steps; step 2 without groups (as a log cut from an older run would be).
std::string grouped_log() {
  std::string s = "{\"type\":\"config\",\"config\":{\"strategy\":\"bf16\"}}\n";
  for (int i = 1; i <= 3; ++i) {
    s += "{\"type\":\"step\",\"step\":" + std::to_string(i) + ",\"loss\":4";
    if (i != 2) {
      s += ",\"groups\":{" + group("embeddings", 0.5, 1e-3) + "," + group("attention", 0.25, 2e-3) +
           "," + group("mlp", 0.125, 3e-3) + "," + group("layernorm", 1.0, 1e-5) + "," +
           group("biases", 0.0, i == 1 ? 0.0 : 0.1) + "}";
    }
    s += "}\n";
  }
  return s;
}

TEST(AuditGroups, StepRecordsReadTheirGroups) {
  TempDir dir("groups");
  const RunLog log = read_run_log(write(dir, "g.jsonl", grouped_log()));
  ASSERT_EQ(log.steps.size(), 3u);
  EXPECT_TRUE(log.steps[1].groups.empty());
  ASSERT_EQ(log.steps[0].groups.size(), 5u);
  for (const GroupStepRecord& g : log.steps[2].groups) {
    if (g.group == "attention") {
      EXPECT_DOUBLE_EQ(g.erased_frac, 0.25);
      EXPECT_DOUBLE_EQ(g.update_weight_ratio, 2e-3);
    }
  }
}

TEST(AuditGroups, BadGroupsThrowNamingFileLineAndGroup) {
  TempDir dir("groups");
  auto expect_error = [&](const std::string& groups, const std::string& needle) {
    const std::string path = write(
        dir, "bad.jsonl", "{\"type\":\"step\",\"step\":1,\"loss\":2,\"groups\":" + groups + "}\n");
    try {
      read_run_log(path);
      ADD_FAILURE() << "no error for: " << groups;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("bad.jsonl:1"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("[1]", "\"groups\" must be an object");
  expect_error("{\"mlp\":3}", "group 'mlp': expected an object");
  expect_error("{\"mlp\":{\"erased_frac\":0.5}}",
               "group 'mlp': missing numeric field "
               "'update_weight_ratio'");
  expect_error("{\"mlp\":{\"erased_frac\":1.5,\"update_weight_ratio\":0}}",
               "erased_frac must be in [0, 1]");
  expect_error("{\"mlp\":{\"erased_frac\":0.5,\"update_weight_ratio\":-1}}",
               "update_weight_ratio must be finite and >= 0");
}

TEST(AuditGroups, TwoPanelsPerLogWithOneSeriesPerGroup) {
  TempDir dir("groups");
  const RunLog log = read_run_log(write(dir, "g.jsonl", grouped_log()));
  const std::vector<svg::LineChart> panels = group_panels(log);
  ASSERT_EQ(panels.size(), 2u);
  EXPECT_FALSE(panels[0].log_y);
  EXPECT_TRUE(panels[1].log_y) << "ratios span orders of magnitude";
  for (const svg::LineChart& p : panels) {
    ASSERT_EQ(p.series.size(), 5u);
    EXPECT_EQ(p.series[0].name, "attention") << "name order: the same colours in every panel";
    for (const svg::Series& s : p.series) {
      EXPECT_EQ(s.x, (std::vector<double>{1, 3})) << s.name << ": steps with groups only";
    }
  }
  const std::string doc = group_charts_svg({log, log});
  EXPECT_EQ(count(doc, "<polyline class=\"series\""), 20u) << "2 logs x 2 panels x 5 groups";
  EXPECT_EQ(count(doc, "<?xml"), 1u);
  EXPECT_EQ(count(doc, "<svg "), 5u) << "the document and four nested panels";
  EXPECT_EQ(count(doc, "</svg>"), 5u);
  EXPECT_NE(doc.find("<svg x=\"0\" y=\"1440\" xmlns="), std::string::npos) << "the fourth panel";
  EXPECT_NE(doc.find("height=\"1920\" viewBox=\"0 0 800 1920\""), std::string::npos);
  EXPECT_EQ(doc.rfind("</svg>\n"), doc.size() - 7);

  const RunLog old = read_run_log(
      write(dir, "old.jsonl", "{\"type\":\"step\",\"step\":1,\"loss\":2,\"erased_frac\":0.1}\n"));
  try {
    group_charts_svg({log, old});
    ADD_FAILURE() << "a log without groups was charted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("old.jsonl: no per-group telemetry"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(svg::render_column({}), std::invalid_argument);
}

}  // namespace
}  // namespace srkit::audit
