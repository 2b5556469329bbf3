// The SVG chart writer (lib/util/svg.h): output is well-formed XML (checked by
// a small in-test parser: balanced tags, quoted attributes, escaped text), it
// holds one series element per series, a legend entry per series, axes with
// ticks, bar charts and multi-panel figures, and bad charts are refused. The
// label layout is checked in test_svg_layout.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/util/svg.h"
#include "lib/util/svg_layout.h"
#include "tests/test_svg_support.h"

namespace srkit::svg {
namespace {

using svg_testing::count;
using svg_testing::xml_problem;

LineChart sample_chart() {
  LineChart c;
  c.title = "loss <of> \"runs\" & more";
  c.x_label = "step";
  c.y_label = "loss";
  for (int s = 0; s < 3; ++s) {
    Series series{"run " + std::to_string(s) + " & co", {}, {}};
    for (int i = 0; i < 50; ++i) {
      series.x.push_back(i);
      series.y.push_back(4.0 - s * 0.1 - std::log1p(i));
    }
    c.series.push_back(series);
  }
  return c;
}

TEST(Svg, CheckerRejectsBrokenXml) {
  EXPECT_EQ(xml_problem("<a><b/></a>"), "");
  EXPECT_NE(xml_problem("<a><b></a>"), "");
  EXPECT_NE(xml_problem("<a>x & y</a>"), "");
  EXPECT_NE(xml_problem("<a x=\"1>"), "");
  EXPECT_NE(xml_problem("<a/><b/>"), "");
}

TEST(Svg, LineChartIsWellFormedWithOnePolylinePerSeries) {
  const std::string svg = render(sample_chart());
  EXPECT_EQ(xml_problem(svg), "") << svg.substr(0, 400);
  EXPECT_EQ(count(svg, "<polyline class=\"series\""), 3u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("loss &lt;of&gt; &quot;runs&quot; &amp; more"), std::string::npos);
  EXPECT_NE(svg.find("run 2 &amp; co"), std::string::npos) << "legend entry";
  EXPECT_EQ(count(svg, "<g class=\"legend\">"), 1u);
  EXPECT_GE(count(svg, "text-anchor=\"middle\">"), 3u) << "x tick labels";
  EXPECT_EQ(count(svg, "<g class=\"panel\">"), 1u);
  EXPECT_EQ(svg, render(sample_chart())) << "deterministic";
}

TEST(Svg, LogAxesSkipNonPositivePointsAndLabelPowersOfTen) {
  LineChart c;
  c.log_x = c.log_y = true;
  c.series.push_back({"a", {0.0, 1e-3, 1e-2, 1e-1, 1.0}, {1.0, 1e-4, 1e-3, -1.0, 1e-2}});
  const std::string svg = render(c);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_NE(svg.find(">1e-3<"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline class=\"series\""), 1u);
  // Three usable points: (1e-3,1e-4), (1e-2,1e-3), (1,1e-2).
  const size_t p = svg.find("points=\"");
  const std::string pts = svg.substr(p + 8, svg.find('"', p + 8) - p - 8);
  EXPECT_EQ(count(pts, ","), 3u) << pts;
}

TEST(Svg, HistogramHasOneGroupOfBarsPerSeries) {
  Histogram h;
  h.title = "errors";
  h.edges = {-1, -0.5, 0, 0.5, 1};
  h.series = {{"RN", {1, 5, 5, 1}}, {"SR", {2, 4, 4, 2}}};
  const std::string svg = render(h);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<g class=\"series\""), 2u);
  EXPECT_EQ(count(svg, "<rect x="), 8u + 2u) << "8 bars + background + frame";
}

TEST(Svg, BadChartsThrow) {
  EXPECT_THROW(render(LineChart{}), std::invalid_argument);
  LineChart mismatched;
  mismatched.series.push_back({"a", {1, 2}, {1}});
  EXPECT_THROW(render(mismatched), std::invalid_argument);
  LineChart all_nan;
  all_nan.series.push_back({"a", {NAN}, {1}});
  EXPECT_THROW(render(all_nan), std::invalid_argument);
  Histogram h;
  h.edges = {0, 1};
  h.series = {{"a", {1, 2}}};
  EXPECT_THROW(render(h), std::invalid_argument);
  h.edges = {1, 0};
  h.series = {{"a", {1}}};
  EXPECT_THROW(render(h), std::invalid_argument);
}

TEST(Svg, TicksAreNiceAndCoverTheRange) {
  EXPECT_EQ(linear_ticks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  const std::vector<double> t = linear_ticks(-0.3, 0.3, 6);
  ASSERT_EQ(t.size(), 7u);
  for (size_t k = 0; k < t.size(); ++k) EXPECT_NEAR(t[k], -0.3 + 0.1 * double(k), 1e-12);
  EXPECT_EQ(log_ticks(1e-3, 10), (std::vector<double>{1e-3, 1e-2, 1e-1, 1, 10}));
  EXPECT_TRUE(linear_ticks(1, 1, 5).empty());
  EXPECT_EQ(xml_escape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&apos;");
}

// The points of the first polyline of class `cls`, as "x,y" strings.
std::vector<std::string> polyline_points(const std::string& svg, const std::string& cls) {
  const size_t at = svg.find("<polyline class=\"" + cls + "\"");
  const size_t p = svg.find("points=\"", at) + 8;
  std::vector<std::string> out;
  std::string point;
  for (size_t i = p; svg[i] != '"'; ++i) {
    if (svg[i] == ' ') {
      out.push_back(point);
      point.clear();
    } else {
      point += svg[i];
    }
  }
  return out;
}

TEST(Svg, FaintSeriesAreDrawnFirstAndLeftOutOfTheLegend) {
  LineChart c;
  c.series.push_back({"a", {0, 1, 2}, {1, 2, 3}, Style::kNormal, 0});
  c.series.push_back({"a raw", {0, 1, 2}, {1.5, 1.5, 3.5}, Style::kFaint, 0});
  c.series.push_back({"b", {0, 1, 2}, {2, 3, 4}, Style::kNormal, 1});
  c.series.push_back({"b raw", {0, 1, 2}, {2, 2.5, 4.5}, Style::kFaint, 1});
  const std::string svg = render(c);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<polyline class=\"series\""), 2u);
  EXPECT_EQ(count(svg, "<polyline class=\"series faint\""), 2u);
  EXPECT_LT(svg.rfind("class=\"series faint\""), svg.find("class=\"series\"")) << "faint below";
  // The faint line takes its partner's colour; only the normal ones are in the legend.
  EXPECT_NE(svg.find("class=\"series faint\" fill=\"none\" stroke=\"#D55E00\""), std::string::npos);
  std::vector<std::string> legend;
  for (const auto& t : svg_testing::geometry(svg).texts) {
    if (t.group == "legend") legend.push_back(t.text);
  }
  EXPECT_EQ(legend, (std::vector<std::string>{"a", "b"}));
}

TEST(Svg, MarkersPutADotOnEveryPointAndASinglePointStillShows) {
  LineChart c;
  c.series.push_back({"val", {1, 2, 3}, {3, 2, 1}, Style::kNormal, 2, true});
  c.series.push_back({"one", {2}, {2.5}, Style::kNormal, 2, true});
  const std::string svg = render(c);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "marker-mid=\"url(#dot2)\""), 2u);
  EXPECT_EQ(count(svg, "<marker id=\"dot2\""), 1u) << "one definition per colour";
  EXPECT_NE(svg.find("<circle cx=\"4\" cy=\"4\" r=\"3\" fill=\"#009E73\"/>"), std::string::npos);
  std::string second = svg.substr(svg.find("<title>val</title>"));
  const std::vector<std::string> pts = polyline_points(second, "series");
  ASSERT_EQ(pts.size(), 2u) << "a lone point becomes a zero-length segment";
  EXPECT_EQ(pts[0], pts[1]);
}

TEST(Svg, LinearTickLabelsShareOneSiScale) {
  LineChart c;
  c.series.push_back({"tokens", {0, 256000}, {1, 2}});
  const std::string svg = render(c);
  EXPECT_NE(svg.find(">50k<"), std::string::npos);
  EXPECT_NE(svg.find(">250k<"), std::string::npos);
  EXPECT_EQ(svg.find("e+0"), std::string::npos);
  c.series[0].x = {0, 3e6};
  EXPECT_NE(render(c).find(">1.5M<"), std::string::npos);
  c.series[0].x = {0, 5000};  // below 10k: plain numbers
  EXPECT_NE(render(c).find(">5000<"), std::string::npos);
}

TEST(Svg, TickLabelsCarryTheDigitsThatTellThemApart) {
  LineChart c;
  c.series.push_back({"val", {1, 2}, {5.399, 5.401}});
  std::vector<std::string> labels;
  for (const auto& t : svg_testing::geometry(render(c)).texts) {
    if (t.group == "ticks" && t.box.x1 < 60) labels.push_back(t.text);  // the y axis
  }
  ASSERT_GE(labels.size(), 3u);
  for (size_t k = 1; k < labels.size(); ++k) EXPECT_NE(labels[k], labels[k - 1]);
  EXPECT_NE(std::find(labels.begin(), labels.end(), "5.4"), labels.end());
  EXPECT_NE(std::find(labels.begin(), labels.end(), "5.4005"), labels.end());
}

TEST(Svg, TickLabelsThinOutOnANarrowChart) {
  auto x_labels = [](int width) {
    LineChart c;
    c.width = width;
    c.series.push_back({"s", {0, 123456789}, {0, 1}});
    size_t n = 0;
    for (const auto& t : svg_testing::geometry(render(c)).texts) {
      n += t.group == "ticks" && t.text.find('M') != std::string::npos;
    }
    return n;
  };
  const size_t wide = x_labels(800), narrow = x_labels(260);
  EXPECT_GE(wide, 5u);
  EXPECT_GE(narrow, 2u);
  EXPECT_LT(narrow, wide);
}

// The x and width of every <rect> inside the <g class="series"> titled `name`.
std::vector<std::pair<double, double>> bars_of(const std::string& svg, const std::string& name) {
  const size_t start = svg.find("<title>" + name + "</title>");
  const size_t end = svg.find("</g>", start);
  std::vector<std::pair<double, double>> out;
  for (size_t p = svg.find("<rect ", start); p < end; p = svg.find("<rect ", p + 1)) {
    const std::string tag = svg.substr(p, svg.find('>', p) - p);
    out.push_back({svg_testing::number_attribute(tag, "x", -1),
                   svg_testing::number_attribute(tag, "width", -1)});
  }
  return out;
}

TEST(Svg, StackedBarsPutSegmentsEndToEnd) {
  BarChart c;
  c.title = "memory";
  c.stacked = true;
  c.categories = {"one", "two"};
  c.series = {{"weights", {1, 2}, {}}, {"grads", {3, NAN}, {"4 MiB", "2 MiB"}}};
  const std::string svg = render(c);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<g class=\"series\""), 2u);
  const auto w = bars_of(svg, "weights"), g = bars_of(svg, "grads");
  ASSERT_EQ(w.size(), 2u);
  ASSERT_EQ(g.size(), 1u) << "a missing value draws no bar";
  EXPECT_DOUBLE_EQ(w[0].first, w[1].first) << "every bar starts at the axis";
  EXPECT_NEAR(g[0].first, w[0].first + w[0].second, 0.011) << "grads start where weights end";
  EXPECT_NEAR(g[0].second, 3 * w[0].second, 0.03);
  EXPECT_NEAR(w[1].second, 2 * w[0].second, 0.02);
  EXPECT_NE(svg.find(">4 MiB</text>"), std::string::npos);
  EXPECT_TRUE(svg_testing::layout_problems(svg).empty());
}

TEST(Svg, GroupedBarsGiveEverySeriesItsOwnBarPerCategory) {
  BarChart c;
  c.categories = {"tiny B=2", "d4 B=8", "d12 B=1"};
  c.series = {{"mixed", {10, 20, 30}, {}}, {"bf16-sr", {15, NAN, 45}, {"15", "OOM", "45"}}};
  const std::string svg = render(c);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "<g class=\"series\""), 2u);
  EXPECT_EQ(count(svg, "<rect x="), 5u + 2u) << "5 bars + background + frame";
  const auto m = bars_of(svg, "mixed"), s = bars_of(svg, "bf16-sr");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_DOUBLE_EQ(m[0].first, s[0].first);
  EXPECT_NEAR(s[1].second, 3 * s[0].second, 0.03);
  EXPECT_NEAR(m[2].second, 3 * m[0].second, 0.03);
  EXPECT_NE(svg.find(">OOM</text>"), std::string::npos);
  for (const char* cat : {">tiny B=2<", ">d4 B=8<", ">d12 B=1<"})
    EXPECT_NE(svg.find(cat), std::string::npos);
}

TEST(Svg, BadBarChartsThrow) {
  BarChart none;
  none.series = {{"a", {}, {}}};
  EXPECT_THROW(render(none), std::invalid_argument);
  BarChart c;
  c.categories = {"x", "y"};
  EXPECT_THROW(render(c), std::invalid_argument) << "no series";
  c.series = {{"a", {1}, {}}};
  EXPECT_THROW(render(c), std::invalid_argument) << "one value short";
  c.series = {{"a", {1, -2}, {}}};
  EXPECT_THROW(render(c), std::invalid_argument) << "negative";
  c.series = {{"a", {1, 2}, {"only one note"}}};
  EXPECT_THROW(render(c), std::invalid_argument);
  EXPECT_THROW(render(Figure{}), std::invalid_argument);
}

TEST(Svg, AFigureStacksItsPanelsInOneDocument) {
  const LineChart line = sample_chart();
  BarChart bars;
  bars.title = "bars";
  bars.categories = {"a", "b"};
  bars.series = {{"s", {1, 2}, {}}};
  auto height = [](const std::string& svg) {
    return svg_testing::number_attribute(svg.substr(svg.find("<svg ")), "height", 0);
  };
  const std::string fig = render(Figure{"both", {line, bars}});
  EXPECT_EQ(xml_problem(fig), "");
  EXPECT_EQ(count(fig, "<g class=\"panel\">"), 2u);
  EXPECT_EQ(count(fig, "<svg "), 1u);
  EXPECT_EQ(count(fig, "<polyline class=\"series\""), 3u);
  EXPECT_EQ(count(fig, "<g class=\"series\""), 1u);
  EXPECT_EQ(height(fig), 36 + height(render(line)) + height(render(bars)));
  // The second panel lies below the first: its frame starts past the first's height.
  const svg_testing::Geometry g = svg_testing::geometry(fig);
  ASSERT_EQ(g.frames.size(), 2u);
  EXPECT_GT(g.frames[1].y0, 36 + height(render(line)));
  EXPECT_TRUE(svg_testing::layout_problems(fig).empty());
}

TEST(Svg, TextWidthEstimateAndShortening) {
  EXPECT_DOUBLE_EQ(text_width("abc", 10), 18.0);
  EXPECT_DOUBLE_EQ(text_width("\xc3\xa9t\xc3\xa9", 10), 18.0) << "code points, not bytes";
  EXPECT_EQ(detail::fit_text("short", 10, 100), "short");
  const std::string cut = detail::fit_text("a-rather-long-strategy-name", 10, 60);
  EXPECT_EQ(cut, "a-ra...ame") << "the distinguishing end stays";
  EXPECT_LE(text_width(cut, 10), 60.0);
  // Multi-byte characters are kept or dropped whole, never split.
  EXPECT_EQ(detail::fit_text("ab\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 10, 36),
            "ab...\xc3\xa9");
  EXPECT_EQ(detail::fit_text("abcdef", 10, 20), "...");
}

TEST(Svg, LogTicksThinToAtMostTheCountAsked) {
  EXPECT_EQ(log_ticks(1e-10, 1e10, 5), (std::vector<double>{1e-10, 1e-5, 1, 1e5, 1e10}));
  EXPECT_EQ(log_ticks(1, 1e3, 1), (std::vector<double>{1}));
}

}  // namespace
}  // namespace srkit::svg
