// A small self-contained SVG chart writer: line charts (linear or log axes)
// and histograms, with axes, ticks, axis labels, a title and a legend. The
// output is one standalone XML document (no scripts, fonts or external
// references), readable in any browser. Each data series becomes exactly one
// <polyline class="series"> (line charts) or one <g class="series"> of <rect>
// bars (histograms), so tests and tools can count series.
#pragma once

#include <string>
#include <vector>

namespace srkit::svg {

struct Series {
  std::string name;
  std::vector<double> x, y;  // same length; non-finite points (or <= 0 on a log axis) are skipped
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

// Throws std::invalid_argument when the chart has no drawable point or a
// histogram's edges and values disagree.
std::string render(const LineChart& chart);
std::string render(const Histogram& chart);

// Tick positions: "nice" 1-2-5 multiples covering [lo, hi] (about `target`
// of them) or, for log axes, the powers of ten within [lo, hi] (both > 0).
std::vector<double> linear_ticks(double lo, double hi, int target);
std::vector<double> log_ticks(double lo, double hi);

// &, <, >, " and ' as XML entities.
std::string xml_escape(const std::string& text);

}  // namespace srkit::svg
