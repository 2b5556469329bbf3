// The documents: one chart alone, a figure of panels stacked top to bottom, or a
// column of line charts (render_column).
#include "lib/util/svg.h"

#include <algorithm>
#include <stdexcept>

#include "lib/util/format.h"
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

std::string render_column(const std::vector<LineChart>& panels) {
  if (panels.empty()) throw std::invalid_argument("svg: a column of panels needs at least one");
  std::string body;
  int width = 0, height = 0;
  for (const LineChart& panel : panels) {
    const std::string doc = render(panel);
    // Drop the XML declaration and place the panel's root <svg> at its offset:
    // a nested <svg> is its own viewport, so the panel draws as it would alone.
    const size_t root = doc.find("<svg ");
    if (root == std::string::npos)
      throw std::logic_error("svg: a rendered chart has no <svg> root");
    body += strprintf("<svg x=\"0\" y=\"%d\" ", height) + doc.substr(root + 5);
    width = std::max(width, panel.width);
    height += panel.height;
  }
  return strprintf(
             "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
             "viewBox=\"0 0 %d %d\">\n",
             width, height, width, height) +
         body + "</svg>\n";
}

}  // namespace srkit::svg
