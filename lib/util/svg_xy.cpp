// Line charts and histograms: data on an x-y plot area, with ticks and labels
// on both axes.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "lib/util/format.h"
#include "lib/util/svg_layout.h"

namespace srkit::svg::detail {
namespace {

// The plot area of a panel and its data-to-pixel mapping (panel coordinates).
struct Plot {
  Axis x, y;
  double x0 = 0, x1 = 0, top = 0, bottom = 0;
  double px(double v) const { return x0 + (x.to_plot(v) - x.lo) / (x.hi - x.lo) * (x1 - x0); }
  double py(double v) const {
    return bottom - (y.to_plot(v) - y.lo) / (y.hi - y.lo) * (bottom - top);
  }
};

struct Frame {
  std::string title, x_label, y_label;
  int width = 0, height = 0;
  std::vector<LegendEntry> legend;
};

// Below the plot: tick labels (baseline +18) and the x label (baseline +40).
double axis_band(const Frame& f) { return 24 + (f.x_label.empty() ? 0 : 22); }

// Lays the panel out and draws everything but the data: title, grid, ticks
// and their labels, the frame, axis labels and the legend. Sets *height.
Plot draw_frame(Doc& doc, const Frame& f, const Axis& x, const Axis& y, double* height) {
  Plot p;
  p.x = x;
  p.y = y;
  const double W = f.width, top = title_height(f.title), band = axis_band(f);
  const LegendLayout legend = plan_legend(f.legend, W, f.height - top - band - 8 - 4);
  // A legend below the plot adds to the panel's height rather than taking the plot's.
  const double below = legend.beside ? 0 : legend.height + 8;
  const double bottom = band + 8 + below;
  const double H = std::max(f.height + below, top + bottom + 80);  // room for the data
  p.top = top;
  p.bottom = H - bottom;
  const Ticks yt = fit_ticks(y, p.bottom - p.top, false, 6);
  // Tick labels end 8 px left of the plot; the vertical y label spans x 8..21.
  p.x0 = f.y_label.empty() ? std::max(40.0, 14 + yt.widest()) : std::max(64.0, 32 + yt.widest());
  const double right = legend.beside && !f.legend.empty()
                           ? legend.width
                           : std::max(20.0, widest_tick_label(x, 8) / 2 + 6);
  p.x1 = W - right;
  const Ticks xt = fit_ticks(x, p.x1 - p.x0, true, 8);

  draw_title(doc, f.title, W);
  doc.raw("<g class=\"axes\" stroke=\"#888\" stroke-width=\"1\">\n");
  for (double t : xt.at) {
    const double px = p.px(t);
    doc.line(px, p.bottom, px, p.top, " stroke=\"#eee\"");
    doc.line(px, p.bottom, px, p.bottom + 5, "");
  }
  for (double t : yt.at) {
    const double py = p.py(t);
    doc.line(p.x0, py, p.x1, py, " stroke=\"#eee\"");
    doc.line(p.x0 - 5, py, p.x0, py, "");
  }
  doc.rect(p.x0, p.top, p.x1 - p.x0, p.bottom - p.top,
           " class=\"frame\" fill=\"none\" stroke=\"#000\"");
  doc.raw("</g>\n<g class=\"ticks\">\n");
  for (size_t k = 0; k < xt.at.size(); ++k) {
    const double px = p.px(xt.at[k]), half = text_width(xt.labels[k], kFontSize) / 2;
    if (px - half < 1 || px + half > W - 1) continue;  // would leave the panel
    doc.text(px, p.bottom + 18, xt.labels[k], Anchor::kMiddle, kFontSize);
  }
  for (size_t k = 0; k < yt.at.size(); ++k) {
    doc.text(p.x0 - 8, p.py(yt.at[k]) + 4, yt.labels[k], Anchor::kEnd, kFontSize);
  }
  doc.raw("</g>\n");
  if (!f.x_label.empty()) {
    doc.text((p.x0 + p.x1) / 2, p.bottom + 40,
             fit_text(f.x_label, kFontSize, centred_room((p.x0 + p.x1) / 2, W)), Anchor::kMiddle,
             kFontSize);
  }
  if (!f.y_label.empty()) {
    doc.vertical_text(18, (p.top + p.bottom) / 2, fit_text(f.y_label, kFontSize, p.bottom - p.top),
                      kFontSize);
  }
  if (legend.beside) {
    draw_legend(doc, f.legend, legend, p.x1 + 12, p.top + 4);
  } else {
    draw_legend(doc, f.legend, legend, (W - legend.width) / 2, p.bottom + band + 8);
  }
  *height = H;
  return p;
}

}  // namespace

double draw_panel(Doc& doc, const LineChart& chart) {
  Axis x{0, 0, chart.log_x}, y{0, 0, chart.log_y};
  bool any = false;
  for (const Series& s : chart.series) {
    if (s.x.size() != s.y.size()) {
      throw std::invalid_argument("svg: series '" + s.name + "' has x and y of different lengths");
    }
    for (size_t k = 0; k < s.x.size(); ++k) {
      if (!x.usable(s.x[k]) || !y.usable(s.y[k])) continue;
      const double a = x.to_plot(s.x[k]), b = y.to_plot(s.y[k]);
      if (!any) x.lo = x.hi = a, y.lo = y.hi = b;
      x.lo = std::min(x.lo, a), x.hi = std::max(x.hi, a);
      y.lo = std::min(y.lo, b), y.hi = std::max(y.hi, b);
      any = true;
    }
  }
  if (!any) throw std::invalid_argument("svg: line chart '" + chart.title + "' has no points");
  x.finish_range();
  y.finish_range();
  auto color_of = [&](size_t k) {
    return chart.series[k].color >= 0 ? chart.series[k].color : int(k);
  };
  Frame f{chart.title, chart.x_label, chart.y_label, chart.width, chart.height, {}};
  for (size_t k = 0; k < chart.series.size(); ++k) {
    if (chart.series[k].style == Style::kNormal)
      f.legend.push_back({chart.series[k].name, color_of(k)});
  }
  double height = 0;
  const Plot p = draw_frame(doc, f, x, y, &height);
  // Faint series first, so that the normal lines are drawn over them.
  for (const Style pass : {Style::kFaint, Style::kNormal}) {
    for (size_t k = 0; k < chart.series.size(); ++k) {
      const Series& s = chart.series[k];
      if (s.style != pass) continue;
      std::string points;
      size_t n = 0;
      for (size_t i = 0; i < s.x.size(); ++i) {
        if (!x.usable(s.x[i]) || !y.usable(s.y[i])) continue;
        points += doc.point(p.px(s.x[i]), p.py(s.y[i]));
        ++n;
      }
      // A single point as a zero-length segment: it still carries its markers.
      if (n == 1) points += points;
      const int c = color_of(k);
      const bool faint = s.style == Style::kFaint;
      doc.raw(strprintf(
          "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s%s%s "
          "stroke-linejoin=\"round\" points=\"%s\"><title>%s</title></polyline>\n",
          faint ? "series faint" : "series", color(c), faint ? "1" : "1.8",
          faint ? " stroke-opacity=\"0.3\"" : "", dash(c),
          s.markers ? doc.dot_markers(c).c_str() : "", points.c_str(), xml_escape(s.name).c_str()));
    }
  }
  return height;
}

double draw_panel(Doc& doc, const Histogram& chart) {
  const size_t bins = chart.edges.size() < 2 ? 0 : chart.edges.size() - 1;
  if (bins == 0) throw std::invalid_argument("svg: histogram '" + chart.title + "' has no bins");
  for (size_t k = 0; k < bins; ++k) {
    if (!(chart.edges[k] < chart.edges[k + 1])) {
      throw std::invalid_argument("svg: histogram edges must be finite and ascending");
    }
  }
  Axis x{chart.edges.front(), chart.edges.back(), false}, y{0, 0, false};
  for (const HistogramSeries& s : chart.series) {
    if (s.values.size() != bins) {
      throw std::invalid_argument("svg: histogram series '" + s.name + "' needs one value per bin");
    }
    for (double v : s.values) {
      if (std::isfinite(v)) y.hi = std::max(y.hi, v);
    }
  }
  if (chart.series.empty()) throw std::invalid_argument("svg: histogram has no series");
  y.hi = y.hi > 0 ? y.hi * 1.05 : 1;
  Frame f{chart.title, chart.x_label, chart.y_label, chart.width, chart.height, {}};
  for (size_t k = 0; k < chart.series.size(); ++k)
    f.legend.push_back({chart.series[k].name, int(k), true});
  double height = 0;
  const Plot p = draw_frame(doc, f, x, y, &height);
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const HistogramSeries& s = chart.series[k];
    doc.raw(strprintf("<g class=\"series\" fill=\"%s\" fill-opacity=\"0.45\" stroke=\"%s\">",
                      color(int(k)), color(int(k))));
    doc.raw("<title>" + xml_escape(s.name) + "</title>\n");
    for (size_t b = 0; b < bins; ++b) {
      const double v = std::isfinite(s.values[b]) ? s.values[b] : 0;
      const double left = p.px(chart.edges[b]), right = p.px(chart.edges[b + 1]);
      const double top = p.py(v), base = p.py(0);
      doc.rect(left, top, right - left, base - top, "");
    }
    doc.raw("</g>\n");
  }
  return height;
}

}  // namespace srkit::svg::detail
