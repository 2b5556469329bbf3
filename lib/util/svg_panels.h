// Several line charts in one standalone SVG document, one below the other:
// each panel is exactly what render(LineChart) draws, nested at its offset,
// so the document holds the panels' <polyline class="series"> elements and
// nothing else that counts as a series.
#pragma once

#include <string>
#include <vector>

#include "lib/util/svg.h"

namespace srkit::svg {

// Throws std::invalid_argument when there is no panel or a panel has no
// drawable point (as render does).
std::string render_column(const std::vector<LineChart>& panels);

}  // namespace srkit::svg
