// The documents: one chart alone, or a figure of panels stacked top to bottom.
#include "lib/util/svg.h"

#include <algorithm>
#include <stdexcept>

#include "lib/util/svg_layout.h"

namespace srkit::svg {

std::string render(const Figure& figure) {
  if (figure.panels.empty())
    throw std::invalid_argument("svg: figure '" + figure.title + "' has no panels");
  double width = 0;
  for (const Panel& p : figure.panels) {
    width = std::max(width, double(std::visit([](const auto& chart) { return chart.width; }, p)));
  }
  detail::Doc doc;
  double y = 0;
  if (!figure.title.empty()) {
    doc.text(width / 2, 26, detail::fit_text(figure.title, kFigureTitleFontSize, width - 20),
             detail::Anchor::kMiddle, kFigureTitleFontSize, " class=\"title\"");
    y = 36;
  }
  for (const Panel& p : figure.panels) {
    doc.set_origin(y);
    doc.raw("<g class=\"panel\">\n");
    y += std::visit([&](const auto& chart) { return detail::draw_panel(doc, chart); }, p);
    doc.raw("</g>\n");
  }
  return doc.finish(width, y);
}

std::string render(const LineChart& chart) { return render(Figure{"", {chart}}); }
std::string render(const Histogram& chart) { return render(Figure{"", {chart}}); }
std::string render(const BarChart& chart) { return render(Figure{"", {chart}}); }

}  // namespace srkit::svg
