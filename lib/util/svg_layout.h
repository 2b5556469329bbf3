// Internals of the SVG chart writer (lib/util/svg.h), shared by its chart
// kinds: the document being written, axes and their tick labels, the legend,
// and the layout rules that keep labels apart.
#pragma once

#include <string>
#include <vector>

#include "lib/util/svg.h"

namespace srkit::svg::detail {

// Palette entry k (Okabe-Ito, colour-blind friendly), and a dash pattern for
// the second round of the palette.
const char* color(int k);
const char* dash(int k);

// `text` shortened to fit max_px by "..." in its middle (whole code points):
// names that differ only at their end (strategy overrides) stay apart.
std::string fit_text(const std::string& text, double font_size, double max_px);
// The widest a label centred at x may be in a panel `width` px wide.
double centred_room(double x, double width);

enum class Anchor { kStart, kMiddle, kEnd };

// The document: elements are written in panel coordinates, shifted down by
// the current panel's origin.
class Doc {
 public:
  void set_origin(double y) { oy_ = y; }
  void raw(const std::string& s) { body_ += s; }
  void line(double x1, double y1, double x2, double y2, const std::string& attrs);
  void rect(double x, double y, double w, double h, const std::string& attrs);
  void text(double x, double y, const std::string& s, Anchor anchor, double font_size,
            const std::string& attrs = "");
  // Text turned 90 degrees counter-clockwise about (x, y), centred there.
  void vertical_text(double x, double y, const std::string& s, double font_size);
  // "x,y " in document coordinates, for polyline points.
  std::string point(double x, double y) const;
  // marker-start/mid/end attributes drawing a dot of palette colour k.
  std::string dot_markers(int k);
  // The whole document, width x height px.
  std::string finish(double width, double height) const;

 private:
  double oy_ = 0;
  std::string body_;
  std::vector<int> marker_colors_;
};

// One axis: data range in plotted (possibly log10) units.
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double to_plot(double v) const;
  bool usable(double v) const;
  // Widens a degenerate range and pads a linear one by 5%.
  void finish_range();
};

// Ticks with their labels.
struct Ticks {
  std::vector<double> at;  // data values
  std::vector<std::string> labels;
  double widest() const;  // px at kFontSize
};

// The densest tick set of about `target` (linear) or at most 10 (log) ticks
// whose labels keep kLabelGap px between neighbours along an axis `length`
// px long. Horizontal axes compare label widths, vertical ones font heights.
Ticks fit_ticks(const Axis& axis, double length, bool horizontal, int target);
// The widest label any tick set of the axis could have (for margins).
double widest_tick_label(const Axis& axis, int target);

constexpr double kLabelGap = 6;

struct LegendEntry {
  std::string name;
  int color = 0;
  bool block = false;  // a filled block (bars) instead of a line
};

// Where the legend goes: beside the plot (one column at the right) when it
// takes at most kBesideShare of the width and its rows fit `plot_height`,
// else in rows of equal columns below the plot.
struct LegendLayout {
  bool beside = true;
  int columns = 1, rows = 0;
  double column_width = 0, width = 0, height = 0;
  double name_px = 0;  // names are shortened to this width
};
constexpr double kBesideShare = 0.4, kLegendRow = 18;
LegendLayout plan_legend(const std::vector<LegendEntry>& entries, double panel_width,
                         double plot_height);
// Draws it with its top-left corner at (x, y).
void draw_legend(Doc& doc, const std::vector<LegendEntry>& entries, const LegendLayout& layout,
                 double x, double y);

// A panel title, centred and shortened to the width.
void draw_title(Doc& doc, const std::string& title, double panel_width);
double title_height(const std::string& title);

// Panel renderers: each draws one chart, chart.width px wide, with its
// top-left corner at the document's origin, and returns its height. Throw as
// render() does (svg.h).
double draw_panel(Doc& doc, const LineChart& chart);
double draw_panel(Doc& doc, const Histogram& chart);
double draw_panel(Doc& doc, const BarChart& chart);

}  // namespace srkit::svg::detail
