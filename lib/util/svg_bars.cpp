// Horizontal bar charts, grouped or stacked: categories down the left side,
// where long names have room, values along the bottom axis.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "lib/util/format.h"
#include "lib/util/svg_layout.h"

namespace srkit::svg::detail {
namespace {

void validate(const BarChart& chart) {
  const std::string what = "svg: bar chart '" + chart.title + "'";
  if (chart.categories.empty()) throw std::invalid_argument(what + " has no categories");
  if (chart.series.empty()) throw std::invalid_argument(what + " has no series");
  for (const BarSeries& s : chart.series) {
    if (s.values.size() != chart.categories.size()) {
      throw std::invalid_argument(what + ": series '" + s.name + "' needs one value per category");
    }
    if (!s.notes.empty() && s.notes.size() != chart.categories.size()) {
      throw std::invalid_argument(what + ": series '" + s.name +
                                  "' needs no notes or one per category");
    }
    for (double v : s.values) {
      if (std::isfinite(v) && v < 0) {
        throw std::invalid_argument(what + ": series '" + s.name + "' has a negative value");
      }
    }
  }
}

double value_or_zero(double v) { return std::isfinite(v) ? v : 0.0; }

// Where each bar (series s, category c) starts and ends along the value axis.
struct Span {
  double start = 0, end = 0;
};
std::vector<std::vector<Span>> spans(const BarChart& chart) {
  std::vector<std::vector<Span>> out(chart.series.size(),
                                     std::vector<Span>(chart.categories.size()));
  for (size_t c = 0; c < chart.categories.size(); ++c) {
    double at = 0;
    for (size_t s = 0; s < chart.series.size(); ++s) {
      const double v = value_or_zero(chart.series[s].values[c]);
      out[s][c] = chart.stacked ? Span{at, at + v} : Span{0, v};
      if (chart.stacked) at += v;
    }
  }
  return out;
}

// Bar thickness and the pitch of the category rows.
constexpr double kStackedBar = 18, kStackedPitch = 28, kGroupedBar = 12, kGroupGap = 14;
constexpr double kNoteGap = 4;

}  // namespace

double draw_panel(Doc& doc, const BarChart& chart) {
  validate(chart);
  const size_t nc = chart.categories.size(), ns = chart.series.size();
  const double W = chart.width, top = title_height(chart.title);
  const double pitch = chart.stacked ? kStackedPitch : double(ns) * kGroupedBar + kGroupGap;
  const double band = 24 + (chart.value_label.empty() ? 0 : 22);

  std::vector<std::string> labels;
  double widest_label = 0;
  for (const std::string& c : chart.categories) {
    labels.push_back(fit_text(c, kFontSize, kBesideShare * W));
    widest_label = std::max(widest_label, text_width(labels.back(), kFontSize));
  }
  std::vector<LegendEntry> entries;
  for (size_t s = 0; s < ns; ++s) entries.push_back({chart.series[s].name, int(s), true});
  const LegendLayout legend =
      plan_legend(entries, W, std::numeric_limits<double>::infinity());  // the plot grows to fit
  const double rows_height = double(nc) * pitch + 8;
  const double plot_height = legend.beside ? std::max(rows_height, legend.height + 8) : rows_height;
  const double x0 = std::max(60.0, 14 + widest_label);
  const double bottom_y = top + plot_height;

  // The value axis: from 0 to past the longest bar, with room for every note.
  const std::vector<std::vector<Span>> at = spans(chart);
  double longest = 0;
  for (const auto& series : at)
    for (const Span& b : series) longest = std::max(longest, b.end);
  Axis v{0, longest > 0 ? longest * 1.05 : 1, false};
  const double right =
      legend.beside ? legend.width : std::max(20.0, widest_tick_label(v, 6) / 2 + 6);
  const double x1 = W - right, L = x1 - x0;
  for (size_t s = 0; s < ns; ++s) {
    for (size_t c = 0; c < chart.series[s].notes.size(); ++c) {
      const double room = L - kNoteGap - text_width(chart.series[s].notes[c], kNoteFontSize) - 2;
      if (room > 0.25 * L) v.hi = std::max(v.hi, at[s][c].end * L / room);
    }
  }
  const Ticks ticks = fit_ticks(v, L, true, 6);
  auto px = [&](double value) { return x0 + value / v.hi * L; };

  draw_title(doc, chart.title, W);
  doc.raw("<g class=\"axes\" stroke=\"#888\" stroke-width=\"1\">\n");
  for (double t : ticks.at) {
    doc.line(px(t), bottom_y, px(t), top, " stroke=\"#eee\"");
    doc.line(px(t), bottom_y, px(t), bottom_y + 5, "");
  }
  doc.rect(x0, top, L, plot_height, " class=\"frame\" fill=\"none\" stroke=\"#000\"");
  doc.raw("</g>\n<g class=\"ticks\">\n");
  for (size_t k = 0; k < ticks.at.size(); ++k) {
    const double half = text_width(ticks.labels[k], kFontSize) / 2;
    if (px(ticks.at[k]) + half > W - 1) continue;  // would leave the panel
    doc.text(px(ticks.at[k]), bottom_y + 18, ticks.labels[k], Anchor::kMiddle, kFontSize);
  }
  doc.raw("</g>\n<g class=\"categories\">\n");
  // Rows centred in a plot that grew to the legend's height.
  const double first_row = top + 4 + (plot_height - rows_height) / 2;
  auto row_top = [&](size_t c) { return first_row + double(c) * pitch; };
  for (size_t c = 0; c < nc; ++c) {
    doc.text(x0 - 8, row_top(c) + pitch / 2 + 4, labels[c], Anchor::kEnd, kFontSize);
  }
  doc.raw("</g>\n");
  // The centre line of bar (s, c).
  auto bar_mid = [&](size_t s, size_t c) {
    return chart.stacked ? row_top(c) + pitch / 2
                         : row_top(c) + kGroupGap / 2 + (double(s) + 0.5) * kGroupedBar;
  };
  const double thickness = chart.stacked ? kStackedBar : kGroupedBar - 2;
  for (size_t s = 0; s < ns; ++s) {
    doc.raw(strprintf("<g class=\"series\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"0.5\">",
                      color(int(s))));
    doc.raw("<title>" + xml_escape(chart.series[s].name) + "</title>\n");
    for (size_t c = 0; c < nc; ++c) {
      const Span& b = at[s][c];
      if (!(b.end > b.start)) continue;
      doc.rect(px(b.start), bar_mid(s, c) - thickness / 2, px(b.end) - px(b.start), thickness, "");
    }
    doc.raw("</g>\n");
  }
  doc.raw("<g class=\"notes\" fill=\"#333\">\n");
  for (size_t s = 0; s < ns; ++s) {
    for (size_t c = 0; c < chart.series[s].notes.size(); ++c) {
      const std::string& note = chart.series[s].notes[c];
      if (note.empty()) continue;
      doc.text(px(at[s][c].end) + kNoteGap, bar_mid(s, c) + 4, note, Anchor::kStart, kNoteFontSize);
    }
  }
  doc.raw("</g>\n");
  if (!chart.value_label.empty()) {
    doc.text((x0 + x1) / 2, bottom_y + 40,
             fit_text(chart.value_label, kFontSize, centred_room((x0 + x1) / 2, W)),
             Anchor::kMiddle, kFontSize);
  }
  if (legend.beside) {
    draw_legend(doc, entries, legend, x1 + 12, top + 4);
    return bottom_y + band + 8;
  }
  draw_legend(doc, entries, legend, (W - legend.width) / 2, bottom_y + band + 8);
  return bottom_y + band + 8 + legend.height + 8;
}

}  // namespace srkit::svg::detail
