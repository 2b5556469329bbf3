#include "lib/train/group_telemetry.h"

#include <cmath>

namespace srkit {

void add_telemetry(AdamWTelemetry& into, const AdamWTelemetry& part) {
  into.update_sq += part.update_sq;
  into.weight_sq += part.weight_sq;
  into.n += part.n;
  into.nonzero += part.nonzero;
  into.erased += part.erased;
  into.m_stalled += part.m_stalled;
  into.v_stalled += part.v_stalled;
}

double erased_fraction(const AdamWTelemetry& t) {
  return t.nonzero ? double(t.erased) / double(t.nonzero) : 0.0;
}

double update_weight_ratio(const AdamWTelemetry& t) {
  return t.weight_sq > 0 ? std::sqrt(t.update_sq / t.weight_sq) : 0.0;
}

nlohmann::json groups_json(const GroupTelemetry& groups) {
  nlohmann::json out = nlohmann::json::object();
  for (size_t g = 0; g < kParamGroupCount; ++g) {
    out[param_group_name(ParamGroup(g))] = {
        {"erased_frac", erased_fraction(groups[g])},
        {"update_weight_ratio", update_weight_ratio(groups[g])}};
  }
  return out;
}

}  // namespace srkit
