#include "lib/util/svg.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "lib/util/format.h"

namespace srkit::svg {
namespace {

// Colour-blind-friendly palette (Okabe-Ito), then repeated with dashes.
const char* const kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                               "#E69F00", "#56B4E9", "#000000", "#F0E442"};
constexpr int kColorCount = 8;

constexpr double kLeft = 80, kRight = 190, kTop = 40, kBottom = 60;

// One axis: data range in plotted (possibly log10) units.
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double to_plot(double v) const { return log ? std::log10(v) : v; }
  bool usable(double v) const { return std::isfinite(v) && (!log || v > 0); }
};

// Widens a degenerate range and pads a linear one by 5%.
void finish_range(Axis* a) {
  if (a->hi - a->lo <= 0) {
    const double pad = a->log ? 0.5 : std::max(1e-12, std::fabs(a->lo) * 0.1 + (a->lo == 0));
    a->lo -= pad;
    a->hi += pad;
  } else if (!a->log) {
    const double pad = 0.05 * (a->hi - a->lo);
    a->lo -= pad;
    a->hi += pad;
  }
}

std::string tick_label(double v, bool log) {
  if (log) return strprintf("1e%d", int(std::lround(v)));
  if (std::fabs(v) < 1e-12) return "0";
  return strprintf("%.4g", v);
}

class Canvas {
 public:
  Canvas(int width, int height, const Axis& x, const Axis& y)
      : w_(width), h_(height), x_(x), y_(y) {}

  double px(double v) const {
    return kLeft + (x_.to_plot(v) - x_.lo) / (x_.hi - x_.lo) * (w_ - kLeft - kRight);
  }
  double py(double v) const {
    return h_ - kBottom - (y_.to_plot(v) - y_.lo) / (y_.hi - y_.lo) * (h_ - kTop - kBottom);
  }

  void begin(const std::string& title) {
    out_ = strprintf(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d "
        "%d\" font-family=\"sans-serif\" font-size=\"12\">\n"
        "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n"
        "<text x=\"%d\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">%s</text>\n",
        w_, h_, w_, h_, w_, h_, w_ / 2, xml_escape(title).c_str());
  }

  // Grid, ticks, tick labels, the frame and the axis labels.
  void axes(const std::string& x_label, const std::string& y_label) {
    const double x0 = kLeft, x1 = w_ - kRight, y0 = h_ - kBottom, y1 = kTop;
    out_ += "<g class=\"axes\" stroke=\"#888\" stroke-width=\"1\">\n";
    const std::vector<double> xt = x_.log ? log_ticks(std::pow(10, x_.lo), std::pow(10, x_.hi))
                                          : linear_ticks(x_.lo, x_.hi, 8);
    for (double t : xt) {
      const double p = px(t);
      out_ += strprintf(
          "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#eee\"/>\n"
          "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n"
          "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" stroke=\"none\" "
          "fill=\"#000\">%s</text>\n",
          p, y0, p, y1, p, y0, p, y0 + 5, p, y0 + 18,
          xml_escape(tick_label(x_.to_plot(t), x_.log)).c_str());
    }
    const std::vector<double> yt = y_.log ? log_ticks(std::pow(10, y_.lo), std::pow(10, y_.hi))
                                          : linear_ticks(y_.lo, y_.hi, 6);
    for (double t : yt) {
      const double p = py(t);
      out_ += strprintf(
          "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#eee\"/>\n"
          "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n"
          "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" stroke=\"none\" "
          "fill=\"#000\">%s</text>\n",
          x0, p, x1, p, x0 - 5, p, x0, p, x0 - 8, p + 4,
          xml_escape(tick_label(y_.to_plot(t), y_.log)).c_str());
    }
    out_ += strprintf(
        "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" "
        "stroke=\"#000\"/>\n</g>\n",
        x0, y1, x1 - x0, y0 - y1);
    out_ += strprintf("<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", (x0 + x1) / 2,
                      h_ - 15, xml_escape(x_label).c_str());
    out_ += strprintf(
        "<text x=\"18\" y=\"%.2f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.2f)\">"
        "%s</text>\n",
        (y0 + y1) / 2, (y0 + y1) / 2, xml_escape(y_label).c_str());
  }

  void legend(const std::vector<std::string>& names) {
    out_ += "<g class=\"legend\">\n";
    for (size_t k = 0; k < names.size(); ++k) {
      const double y = kTop + 10 + 18 * double(k);
      const double x = w_ - kRight + 12;
      out_ += strprintf(
          "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
          "stroke-width=\"3\"%s/>\n"
          "<text x=\"%.2f\" y=\"%.2f\">%s</text>\n",
          x, y, x + 22, y, color(k), dash(k), x + 28, y + 4, xml_escape(names[k]).c_str());
    }
    out_ += "</g>\n";
  }

  static const char* color(size_t k) { return kColors[k % kColorCount]; }
  static const char* dash(size_t k) {
    return (k / kColorCount) % 2 ? " stroke-dasharray=\"6 3\"" : "";
  }

  std::string& out() { return out_; }
  std::string finish() { return out_ + "</svg>\n"; }

 private:
  int w_, h_;
  Axis x_, y_;
  std::string out_;
};

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<double> linear_ticks(double lo, double hi, int target) {
  std::vector<double> out;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi) || target < 1) return out;
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double r = raw / mag;
  const double step = mag * (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10);
  // Integer multiples of step (no accumulated rounding), tolerant at the ends.
  const double k0 = std::ceil(lo / step - 1e-9), k1 = std::floor(hi / step + 1e-9);
  for (double k = k0; k <= k1; ++k) out.push_back(k == 0 ? 0.0 : k * step);
  return out;
}

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> out;
  if (!(lo > 0) || !(hi > lo)) return out;
  const int a = int(std::ceil(std::log10(lo) - 1e-9)), b = int(std::floor(std::log10(hi) + 1e-9));
  const int stride = std::max(1, (b - a + 1 + 9) / 10);  // at most ~10 labels
  for (int e = a; e <= b; e += stride) out.push_back(std::pow(10.0, e));
  return out;
}

std::string render(const LineChart& chart) {
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
  finish_range(&x);
  finish_range(&y);
  Canvas c(chart.width, chart.height, x, y);
  c.begin(chart.title);
  c.axes(chart.x_label, chart.y_label);
  std::vector<std::string> names;
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const Series& s = chart.series[k];
    std::string points;
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!x.usable(s.x[i]) || !y.usable(s.y[i])) continue;
      points += strprintf("%.2f,%.2f ", c.px(s.x[i]), c.py(s.y[i]));
    }
    c.out() += strprintf(
        "<polyline class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"%s "
        "points=\"%s\"><title>%s</title></polyline>\n",
        Canvas::color(k), Canvas::dash(k), points.c_str(), xml_escape(s.name).c_str());
    names.push_back(s.name);
  }
  c.legend(names);
  return c.finish();
}

std::string render(const Histogram& chart) {
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
  Canvas c(chart.width, chart.height, x, y);
  c.begin(chart.title);
  c.axes(chart.x_label, chart.y_label);
  std::vector<std::string> names;
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const HistogramSeries& s = chart.series[k];
    c.out() += strprintf("<g class=\"series\" fill=\"%s\" fill-opacity=\"0.45\" stroke=\"%s\">",
                         Canvas::color(k), Canvas::color(k));
    c.out() += "<title>" + xml_escape(s.name) + "</title>\n";
    for (size_t b = 0; b < bins; ++b) {
      const double v = std::isfinite(s.values[b]) ? s.values[b] : 0;
      const double left = c.px(chart.edges[b]), right = c.px(chart.edges[b + 1]);
      const double top = c.py(v), base = c.py(0);
      c.out() += strprintf("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/>\n", left,
                           top, right - left, base - top);
    }
    c.out() += "</g>\n";
    names.push_back(s.name);
  }
  c.legend(names);
  return c.finish();
}

}  // namespace srkit::svg
