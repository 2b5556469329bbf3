// The figures sr-train --compare (lib/charts/compare_chart.h) and sr-bench
// train --svg (lib/charts/train_chart.h) draw: the moving average, curves from
// a run log, one line per strategy in each loss panel with one colour per
// strategy across panels, memory stacked by category, bench bars per cell.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "lib/charts/compare_chart.h"
#include "lib/charts/train_chart.h"
#include "lib/util/format.h"
#include "tests/test_svg_support.h"

namespace srkit {
namespace {

using svg_testing::count;

// The panels of a figure's document, in order.
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

TEST(RunCharts, MovingAverageKnownAnswers) {
  // m = 0.5, 1.25, 2.125 over weights 0.5, 0.75, 0.875.
  const std::vector<double> a = ema({1, 2, 3}, 0.5);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_DOUBLE_EQ(a[0], 1.0);
  EXPECT_DOUBLE_EQ(a[1], 1.25 / 0.75);
  EXPECT_DOUBLE_EQ(a[2], 2.125 / 0.875);
  EXPECT_EQ(ema({4, 8, 6}, 0.0), (std::vector<double>{4, 8, 6}));
  EXPECT_TRUE(ema({}, 0.9).empty());
  // A constant stays constant (no pull toward the zero start); after a step
  // from 1 to 0 the average decays by the factor per record.
  const std::vector<double> s = ema({2, 2, 2, 0, 0}, 0.9);
  EXPECT_DOUBLE_EQ(s[0], 2.0);
  EXPECT_NEAR(s[2], 2.0, 1e-15);
  EXPECT_NEAR(s[4] / s[3], 0.9 * (1 - std::pow(0.9, 4)) / (1 - std::pow(0.9, 5)), 1e-15);
  EXPECT_THROW(ema({1}, 1.0), std::invalid_argument);
  EXPECT_THROW(ema({1}, -0.1), std::invalid_argument);
}

TEST(RunCharts, CurvesFromALogCountTokensPerStep) {
  audit::RunLog log;
  for (const auto& [step, loss] : {std::pair{1, 3.0}, {2, 2.5}, {4, 2.0}}) {
    audit::StepRecord r;
    r.step = uint64_t(step);
    r.loss = loss;
    log.steps.push_back(r);
  }
  log.evals = {{0, 3.5}, {4, 2.2}};
  MemoryStats m;
  m.peak[int(MemCategory::kGrads)] = 123;
  const CompareCurves c = compare_curves("bf16-sr", log, 64, m);
  EXPECT_EQ(c.strategy, "bf16-sr");
  EXPECT_EQ(c.step_tokens, (std::vector<double>{64, 128, 256}));
  EXPECT_EQ(c.step_loss, (std::vector<double>{3.0, 2.5, 2.0}));
  EXPECT_EQ(c.eval_tokens, (std::vector<double>{0, 256}));
  EXPECT_EQ(c.eval_loss, (std::vector<double>{3.5, 2.2}));
  EXPECT_EQ(c.peak_bytes[int(MemCategory::kGrads)], 123u);
}

TEST(RunCharts, CompareFigureHasOneLinePerStrategyInEachLossPanel) {
  const std::vector<std::string> names = {"fp32", "bf16", "bf16-sr:v=f32"};
  const std::string svg =
      svg::render(compare_figure("compare", svg_testing::sample_compare_runs(names)));
  EXPECT_EQ(svg_testing::xml_problem(svg), "");
  const std::vector<std::string> panels = panels_of(svg);
  ASSERT_EQ(panels.size(), 3u);
  EXPECT_NE(panels[0].find(">validation loss</text>"), std::string::npos);
  EXPECT_EQ(count(panels[0], "<polyline class=\"series\""), 3u);
  EXPECT_EQ(count(panels[0], "marker-mid="), 3u) << "a dot per evaluation";
  EXPECT_EQ(count(panels[1], "<polyline class=\"series\""), 3u) << "the moving averages";
  EXPECT_EQ(count(panels[1], "<polyline class=\"series faint\""), 3u) << "the raw losses";
  EXPECT_NE(panels[1].find("factor 0.9"), std::string::npos) << "the title states the factor";
  EXPECT_EQ(count(panels[2], "<g class=\"series\""), 6u) << "one per memory category";
  for (const char* cat :
       {"weights", "master", "grads", "optimizer state", "activations", "scratch"}) {
    EXPECT_NE(panels[2].find(std::string("<title>") + cat + "</title>"), std::string::npos);
  }
  EXPECT_EQ(count(panels[2], " MiB</text>"), 3u) << "each stack's sum";
  // A strategy keeps its colour: bf16 (second) is vermillion in both loss panels.
  for (int p : {0, 1}) {
    const size_t at = panels[p].find("<title>bf16</title>");
    ASSERT_NE(at, std::string::npos);
    const size_t line = panels[p].rfind("<polyline", at);
    EXPECT_NE(panels[p].substr(line, at - line).find("stroke=\"#D55E00\""), std::string::npos);
  }
  EXPECT_TRUE(svg_testing::layout_problems(svg).empty());
}

TEST(RunCharts, CompareFigureLeavesOutLossPanelsWithoutData) {
  std::vector<CompareCurves> runs = svg_testing::sample_compare_runs({"a", "b"});
  for (CompareCurves& r : runs) r.eval_tokens.clear(), r.eval_loss.clear();
  std::string svg = svg::render(compare_figure("", runs));
  ASSERT_EQ(panels_of(svg).size(), 2u) << "no validation data";
  EXPECT_EQ(svg.find(">validation loss</text>"), std::string::npos);
  // A run stopped before its first step record: no curves, still in the memory chart.
  runs[1].step_tokens.clear(), runs[1].step_loss.clear();
  svg = svg::render(compare_figure("", runs));
  const std::vector<std::string> panels = panels_of(svg);
  ASSERT_EQ(panels.size(), 2u);
  EXPECT_EQ(count(panels[1], ">b</text>"), 1u) << "b's row in the memory chart";
  for (CompareCurves& r : runs) r.step_tokens.clear(), r.step_loss.clear();
  EXPECT_EQ(panels_of(svg::render(compare_figure("", runs))).size(), 1u);
  EXPECT_THROW(compare_figure("", {}), std::invalid_argument);
}

TEST(RunCharts, TrainFigureGroupsStrategiesByCell) {
  const TrainMatrixResult r = svg_testing::sample_bench_result({"mixed", "bf16", "bf16-sr"});
  const svg::Figure f = train_figure(r);
  ASSERT_EQ(f.panels.size(), 2u);
  for (const svg::Panel& p : f.panels) {
    const svg::BarChart& c = std::get<svg::BarChart>(p);
    EXPECT_EQ(c.categories, (std::vector<std::string>{"tiny B=2 T=256", "tiny B=8 T=256",
                                                      "d4 B=2 T=256", "d4 B=8 T=256"}));
    ASSERT_EQ(c.series.size(), 3u);
    EXPECT_EQ(c.series[0].name, "mixed");
    EXPECT_FALSE(c.stacked);
    // Cell 3 (tiny B=8, mixed) ran out of memory: no bar, its status as the note.
    EXPECT_TRUE(std::isnan(c.series[0].values[1]));
    EXPECT_EQ(c.series[0].notes[1], "OOM");
  }
  const svg::BarChart& speed = std::get<svg::BarChart>(f.panels[0]);
  EXPECT_DOUBLE_EQ(speed.series[1].values[0], r.cells[1].tokens_per_s);
  EXPECT_EQ(speed.series[1].notes[0], strprintf("%.0f", r.cells[1].tokens_per_s));
  const svg::BarChart& memory = std::get<svg::BarChart>(f.panels[1]);
  EXPECT_DOUBLE_EQ(memory.series[2].values[3], double(r.cells[11].memory.total_peak) / 1048576.0);
  const std::string svg = svg::render(f);
  EXPECT_EQ(svg_testing::xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<g class=\"series\""), 6u);
  EXPECT_TRUE(svg_testing::layout_problems(svg).empty());
  EXPECT_THROW(train_figure(TrainMatrixResult{}), std::invalid_argument);
}

}  // namespace
}  // namespace srkit
