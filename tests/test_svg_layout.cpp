// Label layout of the SVG charts, checked from the generated geometry: every
// <text>'s box is estimated at 0.6 x font size per character (generous for
// sans-serif digits and lower case, which average 0.5-0.55 em; see
// tests/test_svg_support.h), and for the default chart of every kind with
// seven long strategy names no two boxes overlap, none leaves the document,
// and no label but a bar's note lies over a plot area.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/test_svg_support.h"

namespace srkit::svg_testing {
namespace {

std::string joined(const std::vector<std::string>& problems) {
  std::string out;
  for (const std::string& p : problems) out += p + "\n";
  return out;
}

TEST(SvgLayout, TheCheckSeesOverlapsAndRotatedText) {
  const std::string svg =
      "<svg width=\"200\" height=\"100\" font-size=\"10\">"
      "<text x=\"10\" y=\"20\" text-anchor=\"start\">abcdef</text>"  // x 10..46
      "<text x=\"40\" y=\"24\" text-anchor=\"start\">ghij</text>"    // x 40..64: overlaps
      "<text x=\"100\" y=\"50\" font-size=\"20\" text-anchor=\"middle\">k</text>"
      "<text x=\"190\" y=\"50\" text-anchor=\"middle\" transform=\"rotate(-90 190 50)\">"
      "a-long-vertical-label</text>"  // 126 px tall: leaves the 100 px document
      "</svg>";
  const Geometry g = geometry(svg);
  ASSERT_EQ(g.texts.size(), 4u);
  EXPECT_NEAR(g.texts[2].box.x0, 94, 1e-9);
  EXPECT_NEAR(g.texts[2].box.x1, 106, 1e-9);
  EXPECT_NEAR(g.texts[2].box.y0, 34, 1e-9);
  EXPECT_NEAR(g.texts[2].box.y1, 55, 1e-9);
  EXPECT_NEAR(g.texts[3].box.y1 - g.texts[3].box.y0, 126, 1e-9);
  EXPECT_NEAR(g.texts[3].box.x1 - g.texts[3].box.x0, 10.5, 1e-9);
  const std::vector<std::string> p = layout_problems(svg);
  ASSERT_EQ(p.size(), 2u) << joined(p);
  EXPECT_EQ(p[0], "'abcdef' overlaps 'ghij'");
  EXPECT_EQ(p[1], "'a-long-vertical-label' leaves the document");
}

TEST(SvgLayout, DefaultChartsWithSevenLongNamesKeepLabelsApart) {
  for (const NamedChart& c : default_charts(seven_long_names())) {
    EXPECT_EQ(xml_problem(c.svg), "") << c.kind;
    const Geometry g = geometry(c.svg);
    EXPECT_GE(g.texts.size(), 7u + 4u) << c.kind;
    EXPECT_TRUE(layout_problems(c.svg).empty()) << c.kind << ":\n"
                                                << joined(layout_problems(c.svg));
    // Every name is shown whole, in the legend or as a category label.
    for (const std::string& name : seven_long_names()) {
      bool shown = false;
      for (const TextBox& t : g.texts) shown |= t.text == name;
      EXPECT_TRUE(shown) << c.kind << ": " << name;
    }
  }
}

TEST(SvgLayout, NamesTooLongForTheSideMoveTheLegendBelowInRows) {
  std::vector<std::string> names;
  for (int k = 0; k < 7; ++k) {
    names.push_back("bf16-sr:w=bf16,master=none,m=bf16,v=f32,mround=sr,vround=sr,run-" +
                    std::to_string(k));
  }
  for (const NamedChart& c : default_charts(names)) {
    EXPECT_EQ(xml_problem(c.svg), "") << c.kind;
    EXPECT_TRUE(layout_problems(c.svg).empty()) << c.kind << ":\n"
                                                << joined(layout_problems(c.svg));
    const Geometry g = geometry(c.svg);
    // Legend entries of the long names sit below a plot area, not beside it
    // (the memory chart's legend names categories and stays beside).
    for (const TextBox& t : g.texts) {
      if (t.group != "legend" || t.text.rfind("bf16-sr:", 0) != 0) continue;
      bool below_a_frame = false;
      for (const Box& f : g.frames) below_a_frame |= t.box.y0 > f.y1 && t.box.x0 >= 0;
      EXPECT_TRUE(below_a_frame) << c.kind << ": " << t.text;
    }
  }
}

TEST(SvgLayout, ManySeriesOnANarrowChart) {
  std::vector<std::string> names;
  for (int k = 0; k < 12; ++k) names.push_back("strategy-" + std::to_string(k));
  svg::LineChart c;
  c.width = 360;
  c.height = 300;
  c.title = "a title far too long for a chart this narrow, shortened to fit";
  c.x_label = "tokens";
  c.y_label = "loss";
  for (size_t k = 0; k < names.size(); ++k) {
    svg::Series s{names[k], {}, {}};
    for (int i = 1; i <= 50; ++i) {
      s.x.push_back(i * 12345.0);
      s.y.push_back(sample_loss(int(k), i));
    }
    c.series.push_back(s);
  }
  const std::string svg = svg::render(c);
  EXPECT_TRUE(layout_problems(svg).empty()) << joined(layout_problems(svg));
}

}  // namespace
}  // namespace srkit::svg_testing
