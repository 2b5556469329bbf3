#include "lib/charts/group_charts.h"

#include <map>
#include <stdexcept>

#include "lib/util/svg.h"

namespace srkit::audit {

std::vector<svg::LineChart> group_panels(const RunLog& log) {
  // One series per group name, in name order (the same order in every panel
  // and every log, hence the same colours).
  std::map<std::string, svg::Series> erased, ratio;
  for (const StepRecord& r : log.steps) {
    for (const GroupStepRecord& g : r.groups) {
      svg::Series& e = erased[g.group];
      svg::Series& u = ratio[g.group];
      e.name = u.name = g.group;
      e.x.push_back(double(r.step));
      e.y.push_back(g.erased_frac);
      u.x.push_back(double(r.step));
      u.y.push_back(g.update_weight_ratio);
    }
  }
  if (erased.empty()) {
    throw std::invalid_argument(log.path +
                                ": no per-group telemetry (no step record has \"groups\"; "
                                "--svg-groups needs a log of an sr-train that writes them)");
  }
  const std::string run = log.strategy + " (" + log.path + ")";
  svg::LineChart e, u;
  e.title = "updates below half a bf16 ulp, per tensor group: " + run;
  e.x_label = u.x_label = "step";
  e.y_label = "erased fraction";
  u.title = "update/weight ratio (rms), per tensor group: " + run;
  u.y_label = "update/weight ratio";
  u.log_y = true;
  for (auto& [name, s] : erased) e.series.push_back(std::move(s));
  for (auto& [name, s] : ratio) u.series.push_back(std::move(s));
  return {e, u};
}

std::string group_charts_svg(const std::vector<RunLog>& logs) {
  std::vector<svg::LineChart> panels;
  for (const RunLog& log : logs) {
    for (svg::LineChart& p : group_panels(log)) panels.push_back(std::move(p));
  }
  return svg::render_column(panels);
}

}  // namespace srkit::audit
