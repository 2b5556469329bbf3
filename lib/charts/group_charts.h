// `sr-audit run --svg-groups`: the per-tensor-group telemetry of sr-train logs
// (step records' "groups") over time. Per log, two panels one below the other:
// the erased fraction per group (linear axis, a fraction) and the update/weight
// ratio per group (log axis: groups differ by orders of magnitude); one line
// per group in each. Several logs stack their panel pairs in one document, so
// runs compare on one page with the groups' colours the same in every panel.
#pragma once

#include <string>
#include <vector>

#include "lib/audit/run_log.h"
#include "lib/util/svg.h"

namespace srkit::audit {

// The two panels of one log. Throws std::invalid_argument "PATH: ..." when no
// step record of the log carries "groups".
std::vector<svg::LineChart> group_panels(const RunLog& log);

// Every log's panels in one standalone SVG document.
std::string group_charts_svg(const std::vector<RunLog>& logs);

}  // namespace srkit::audit
