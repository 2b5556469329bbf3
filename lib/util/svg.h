// A small self-contained SVG chart writer: line charts (linear or log axes),
// histograms and horizontal bar charts (grouped or stacked), each with a
// title, axes, ticks, axis labels and a legend, alone in a document or as
// panels stacked in one figure. The output is one standalone XML document (no
// scripts, fonts or external references), readable in any browser.
//
// Every data series is exactly one element with class "series": a <polyline>
// (line charts) or a <g> of <rect> bars (histograms, bar charts), so tests and
// tools can count series. Faint series (the raw values under a smoothed line)
// carry class "series faint". Every panel is one <g class="panel">. All
// coordinates are absolute (no transforms but the rotation of vertical text),
// so the geometry can be checked from the document alone.
//
// Layout: text sizes are estimated as text_width() below; the legend goes
// beside the plot when it is narrow enough and in rows below it otherwise;
// tick labels are thinned to the densest "nice" set whose labels keep a gap;
// names too long for the document are shortened by "..." in their middle
// (the full name stays in the series' <title> tooltip). So no two labels
// overlap at the default sizes, whatever the names.
#pragma once

#include <string>
#include <variant>
#include <vector>

namespace srkit::svg {

enum class Style {
  kNormal,
  kFaint,  // thin and translucent, class "series faint", no legend entry
};

struct Series {
  std::string name;
  std::vector<double> x, y;  // same length; non-finite points (or <= 0 on a log axis) are skipped
  Style style = Style::kNormal;
  int color = -1;        // palette index; -1: the series' position in the chart
  bool markers = false;  // a dot on every point (sparse series, e.g. evaluations)
};

struct LineChart {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  std::vector<Series> series;
  int width = 800, height = 480;
};

// Bars over bins [edges[k], edges[k+1]); one value per bin and series.
struct HistogramSeries {
  std::string name;
  std::vector<double> values;
};
struct Histogram {
  std::string title, x_label, y_label;
  std::vector<double> edges;  // ascending, size = bins + 1
  std::vector<HistogramSeries> series;
  int width = 800, height = 480;
};

// Horizontal bars: one row per category, labelled on the left; values (>= 0)
// along the bottom axis, which starts at 0.
struct BarSeries {
  std::string name;
  std::vector<double> values;      // one per category; non-finite: no bar
  std::vector<std::string> notes;  // empty, or one per category: a label just right of the bar
};
struct BarChart {
  std::string title, value_label;
  std::vector<std::string> categories;
  std::vector<BarSeries> series;
  // false: one bar per series in each row (grouped); true: one bar per row,
  // the series' segments end to end (a note then sits at its segment's end).
  bool stacked = false;
  int width = 800;  // the height follows from the number of bars and the legend
};

using Panel = std::variant<LineChart, Histogram, BarChart>;

// Panels top to bottom in one document as wide as the widest panel.
struct Figure {
  std::string title;  // above the first panel; may be empty
  std::vector<Panel> panels;
};

// Throws std::invalid_argument when a chart has no drawable point, a
// histogram's edges and values disagree, or a bar chart has no categories,
// a series of the wrong length or a negative value.
std::string render(const LineChart& chart);
std::string render(const Histogram& chart);
std::string render(const BarChart& chart);
std::string render(const Figure& figure);

// Tick positions: "nice" 1-2-5 multiples covering [lo, hi] (about `target`
// of them) or, for log axes, powers of ten within [lo, hi] (both > 0), every
// k-th one so that at most `max_count` remain.
std::vector<double> linear_ticks(double lo, double hi, int target);
std::vector<double> log_ticks(double lo, double hi, int max_count = 10);

// &, <, >, " and ' as XML entities.
std::string xml_escape(const std::string& text);

// Font sizes in px: tick labels, axis labels, legend and category labels use
// kFontSize; panel titles kTitleFontSize, a figure's title
// kFigureTitleFontSize; bar notes kNoteFontSize.
constexpr double kFontSize = 12, kTitleFontSize = 15, kFigureTitleFontSize = 17, kNoteFontSize = 11;

// The layout's estimate of a text's rendered width in px: 0.6 x font size per
// character (UTF-8 code point). The average advance of a sans-serif face
// (DejaVu Sans, Liberation Sans, Arial) is 0.5-0.55 em for digits, lower case
// and punctuation, so the estimate is generous for the labels charts carry
// (numbers, strategy and category names); only runs of wide capitals (M, W)
// exceed it.
double text_width(const std::string& text, double font_size);

// Several line charts in one standalone SVG document, one below the other:
// each panel is exactly what render(LineChart) draws, nested at its offset,
// so the document holds the panels' <polyline class="series"> elements and
// nothing else that counts as a series.
// Throws std::invalid_argument when there is no panel or a panel has no
// drawable point (as render does).
std::string render_column(const std::vector<LineChart>& panels);

}  // namespace srkit::svg
