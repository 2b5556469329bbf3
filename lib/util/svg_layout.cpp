#include "lib/util/svg_layout.h"

#include <algorithm>
#include <cmath>

#include "lib/util/format.h"

namespace srkit::svg {

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

double text_width(const std::string& text, double font_size) {
  size_t code_points = 0;
  for (unsigned char c : text) code_points += (c & 0xC0) != 0x80;  // not a continuation byte
  return 0.6 * font_size * double(code_points);
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

std::vector<double> log_ticks(double lo, double hi, int max_count) {
  std::vector<double> out;
  if (!(lo > 0) || !(hi > lo)) return out;
  const int a = int(std::ceil(std::log10(lo) - 1e-9)), b = int(std::floor(std::log10(hi) + 1e-9));
  const int n = b - a + 1, most = std::max(1, max_count);
  const int stride = std::max(1, (n + most - 1) / most);
  for (int e = a; e <= b; e += stride) out.push_back(std::pow(10.0, e));
  return out;
}

namespace detail {
namespace {

const char* const kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                               "#E69F00", "#56B4E9", "#000000", "#F0E442"};
constexpr int kColorCount = 8;

// Linear tick labels share one SI scale chosen by the largest magnitude, so an
// axis reads 0, 50k, 100k rather than 0, 5e+04, 1e+05 (below 10k they stay
// plain: 0, 2000, 4000), and carry the digits that tell neighbours apart
// (5.3995, 5.4, 5.4005 rather than 5.4 three times).
Ticks labelled(const Axis& axis, std::vector<double> at) {
  Ticks t;
  double biggest = 0;
  for (double v : at) biggest = std::max(biggest, std::fabs(v));
  struct Scale {
    double factor;
    const char* suffix;
  };
  Scale scale{1, ""};
  for (const Scale s : {Scale{1e12, "T"}, Scale{1e9, "G"}, Scale{1e6, "M"}, Scale{1e3, "k"}}) {
    if (biggest >= std::max(s.factor, 1e4)) {
      scale = s;
      break;
    }
  }
  // Significant digits: those of the largest label's integer part plus the
  // decimals of the step.
  int digits = 4;
  const double step = at.size() > 1 ? std::fabs(at[1] - at[0]) / scale.factor : 0;
  if (step > 0 && biggest > 0) {
    const int whole = int(std::floor(std::log10(biggest / scale.factor))) + 1;
    const int decimals = std::max(0, -int(std::floor(std::log10(step) + 1e-9)));
    digits = std::clamp(whole + decimals, 1, 15);
  }
  for (double v : at) {
    if (axis.log) {
      t.labels.push_back(strprintf("1e%d", int(std::lround(std::log10(v)))));
    } else if (v == 0) {
      t.labels.push_back("0");
    } else {
      t.labels.push_back(strprintf("%.*g%s", digits, v / scale.factor, scale.suffix));
    }
  }
  t.at = std::move(at);
  return t;
}

// The candidate tick sets of an axis, densest first.
std::vector<Ticks> candidates(const Axis& axis, int target) {
  std::vector<Ticks> out;
  if (axis.log) {
    for (int most = 10; most >= 1; --most)
      out.push_back(labelled(axis, log_ticks(std::pow(10, axis.lo), std::pow(10, axis.hi), most)));
  } else {
    for (int t = std::max(1, target); t >= 1; --t)
      out.push_back(labelled(axis, linear_ticks(axis.lo, axis.hi, t)));
  }
  return out;
}

bool labels_fit(const Axis& axis, const Ticks& t, double length, bool horizontal) {
  for (size_t i = 1; i < t.at.size(); ++i) {
    const double gap =
        std::fabs(axis.to_plot(t.at[i]) - axis.to_plot(t.at[i - 1])) / (axis.hi - axis.lo) * length;
    const double need =
        horizontal
            ? 0.5 * (text_width(t.labels[i], kFontSize) + text_width(t.labels[i - 1], kFontSize))
            : kFontSize;
    if (gap < need + kLabelGap) return false;
  }
  return true;
}

}  // namespace

const char* color(int k) { return kColors[((k % kColorCount) + kColorCount) % kColorCount]; }
const char* dash(int k) { return (k / kColorCount) % 2 ? " stroke-dasharray=\"6 3\"" : ""; }

std::string fit_text(const std::string& text, double font_size, double max_px) {
  if (text_width(text, font_size) <= max_px) return text;
  std::vector<std::string> chars;  // code points
  for (unsigned char c : text) {
    if ((c & 0xC0) != 0x80 || chars.empty()) chars.emplace_back();
    chars.back() += char(c);
  }
  const long keep = std::max(0L, long(max_px / text_width("x", font_size)) - 3);
  std::string out;
  for (long k = 0; k < (keep + 1) / 2; ++k) out += chars[size_t(k)];
  out += "...";
  for (size_t k = chars.size() - size_t(keep / 2); k < chars.size(); ++k) out += chars[k];
  return out;
}

double centred_room(double x, double width) {
  return 2 * std::max(0.0, std::min(x, width - x) - 4);
}

// ---- document ----------------------------------------------------------------

void Doc::line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  body_ += strprintf("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"%s/>\n", x1, y1 + oy_,
                     x2, y2 + oy_, attrs.c_str());
}

void Doc::rect(double x, double y, double w, double h, const std::string& attrs) {
  body_ += strprintf("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"%s/>\n", x, y + oy_,
                     w, h, attrs.c_str());
}

void Doc::text(double x, double y, const std::string& s, Anchor anchor, double font_size,
               const std::string& attrs) {
  const char* a = anchor == Anchor::kStart ? "start" : anchor == Anchor::kMiddle ? "middle" : "end";
  body_ +=
      strprintf("<text x=\"%.1f\" y=\"%.1f\" font-size=\"%g\" text-anchor=\"%s\"%s>%s</text>\n", x,
                y + oy_, font_size, a, attrs.c_str(), xml_escape(s).c_str());
}

void Doc::vertical_text(double x, double y, const std::string& s, double font_size) {
  body_ += strprintf(
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%g\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
      x, y + oy_, font_size, x, y + oy_, xml_escape(s).c_str());
}

std::string Doc::point(double x, double y) const { return strprintf("%.2f,%.2f ", x, y + oy_); }

std::string Doc::dot_markers(int k) {
  const int c = ((k % kColorCount) + kColorCount) % kColorCount;
  if (std::find(marker_colors_.begin(), marker_colors_.end(), c) == marker_colors_.end())
    marker_colors_.push_back(c);
  return strprintf(
      " marker-start=\"url(#dot%d)\" marker-mid=\"url(#dot%d)\" marker-end=\"url(#dot%d)\"", c, c,
      c);
}

std::string Doc::finish(double width, double height) const {
  const int w = int(std::ceil(width)), h = int(std::ceil(height));
  std::string out = strprintf(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d "
      "%d\" font-family=\"sans-serif\" font-size=\"%g\">\n"
      "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
      w, h, w, h, kFontSize, w, h);
  out += body_;
  if (!marker_colors_.empty()) {
    // Fixed-size dots (userSpaceOnUse: not scaled by the line's stroke width).
    out += "<defs>\n";
    for (int c : marker_colors_) {
      out += strprintf(
          "<marker id=\"dot%d\" markerWidth=\"8\" markerHeight=\"8\" refX=\"4\" refY=\"4\" "
          "markerUnits=\"userSpaceOnUse\"><circle cx=\"4\" cy=\"4\" r=\"3\" fill=\"%s\"/>"
          "</marker>\n",
          c, kColors[c]);
    }
    out += "</defs>\n";
  }
  return out + "</svg>\n";
}

// ---- axes ----------------------------------------------------------------------

double Axis::to_plot(double v) const { return log ? std::log10(v) : v; }
bool Axis::usable(double v) const { return std::isfinite(v) && (!log || v > 0); }

void Axis::finish_range() {
  if (hi - lo <= 0) {
    const double pad = log ? 0.5 : std::max(1e-12, std::fabs(lo) * 0.1 + (lo == 0));
    lo -= pad;
    hi += pad;
  } else if (!log) {
    const double pad = 0.05 * (hi - lo);
    lo -= pad;
    hi += pad;
  }
}

double Ticks::widest() const {
  double w = 0;
  for (const std::string& l : labels) w = std::max(w, text_width(l, kFontSize));
  return w;
}

Ticks fit_ticks(const Axis& axis, double length, bool horizontal, int target) {
  std::vector<Ticks> all = candidates(axis, target);
  for (Ticks& t : all) {
    if (!t.at.empty() && labels_fit(axis, t, length, horizontal)) return std::move(t);
  }
  // Not even the sparsest set fits (an axis a few labels long): one tick.
  for (Ticks& t : all) {
    if (!t.at.empty()) {
      t.at.resize(1);
      t.labels.resize(1);
      return std::move(t);
    }
  }
  return {};
}

double widest_tick_label(const Axis& axis, int target) {
  double w = 0;
  for (const Ticks& t : candidates(axis, target)) w = std::max(w, t.widest());
  return w;
}

// ---- legend and title ----------------------------------------------------------

namespace {
constexpr double kSwatch = 28;  // 22 px sample + 6 px before the name
}

LegendLayout plan_legend(const std::vector<LegendEntry>& entries, double panel_width,
                         double plot_height) {
  LegendLayout l;
  if (entries.empty()) return l;
  const int n = int(entries.size());
  double widest = 0;
  for (const LegendEntry& e : entries) widest = std::max(widest, text_width(e.name, kFontSize));
  const double beside_width = 12 + kSwatch + widest + 10;
  if (beside_width <= kBesideShare * panel_width && n * kLegendRow <= plot_height) {
    l.rows = n;
    l.column_width = l.width = beside_width;
    l.height = n * kLegendRow;
    l.name_px = widest;
    return l;
  }
  l.beside = false;
  const double usable = panel_width - 20;
  l.name_px = std::min(widest, usable - kSwatch - 16);
  l.column_width = kSwatch + l.name_px + 16;
  l.columns = std::clamp(int(usable / l.column_width), 1, n);
  l.rows = (n + l.columns - 1) / l.columns;
  l.width = l.columns * l.column_width;
  l.height = l.rows * kLegendRow;
  return l;
}

void draw_legend(Doc& doc, const std::vector<LegendEntry>& entries, const LegendLayout& layout,
                 double x, double y) {
  if (entries.empty()) return;
  doc.raw("<g class=\"legend\">\n");
  for (size_t k = 0; k < entries.size(); ++k) {
    const LegendEntry& e = entries[k];
    const double ex = x + double(int(k) % layout.columns) * layout.column_width;
    const double cy = y + double(int(k) / layout.columns) * kLegendRow + kLegendRow / 2;
    doc.line(ex, cy, ex + 22, cy,
             strprintf(" stroke=\"%s\" stroke-width=\"%d\"%s", color(e.color), e.block ? 10 : 3,
                       e.block ? "" : dash(e.color)));
    doc.text(ex + kSwatch, cy + 4, fit_text(e.name, kFontSize, layout.name_px), Anchor::kStart,
             kFontSize);
  }
  doc.raw("</g>\n");
}

double title_height(const std::string& title) { return title.empty() ? 14 : 40; }

void draw_title(Doc& doc, const std::string& title, double panel_width) {
  if (title.empty()) return;
  doc.text(panel_width / 2, 24, fit_text(title, kTitleFontSize, panel_width - 20), Anchor::kMiddle,
           kTitleFontSize, " class=\"title\"");
}

}  // namespace detail
}  // namespace srkit::svg
