// The SVG chart writer (lib/util/svg.h): output is well-formed XML (checked by
// a small in-test parser: balanced tags, quoted attributes, escaped text), it
// holds one series element per series, a legend entry per series, axes with
// ticks, and bad charts are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/util/svg.h"

namespace srkit::svg {
namespace {

// Returns "" when `xml` is well-formed (one root element, every tag closed in
// order, attribute values quoted, no raw '<' or stray '&' in text), else why not.
std::string xml_problem(const std::string& xml) {
  std::vector<std::string> stack;
  size_t i = 0, roots = 0;
  while (i < xml.size()) {
    if (xml[i] != '<') {
      if (xml[i] == '&') {
        const size_t semi = xml.find(';', i);
        const std::string ent = xml.substr(i, semi == std::string::npos ? 0 : semi - i + 1);
        if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;")
          return "bad entity at " + std::to_string(i);
      }
      if (stack.empty() && !std::isspace(static_cast<unsigned char>(xml[i])))
        return "text outside the root at " + std::to_string(i);
      ++i;
      continue;
    }
    // Find the end of the tag, skipping quoted attribute values.
    size_t j = i + 1;
    char quote = 0;
    for (; j < xml.size(); ++j) {
      if (quote) {
        if (xml[j] == quote)
          quote = 0;
        else if (xml[j] == '<')
          return "'<' inside an attribute at " + std::to_string(j);
      } else if (xml[j] == '"' || xml[j] == '\'') {
        quote = xml[j];
      } else if (xml[j] == '>') {
        break;
      }
    }
    if (j >= xml.size()) return "unterminated tag at " + std::to_string(i);
    const std::string tag = xml.substr(i + 1, j - i - 1);
    i = j + 1;
    if (tag.front() == '?') {
      if (tag.back() != '?') return "bad declaration";
      continue;
    }
    if (tag.front() == '/') {
      const std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name) return "mismatched </" + name + ">";
      stack.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" \t\n/"));
    if (name.empty()) return "empty tag name";
    if (stack.empty()) ++roots;
    if (tag.back() != '/') stack.push_back(name);
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  if (roots != 1) return "expected one root element, got " + std::to_string(roots);
  return "";
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

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
  EXPECT_GE(count(svg, "text-anchor=\"middle\" stroke=\"none\""), 3u) << "x tick labels";
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

}  // namespace
}  // namespace srkit::svg
