// The optimizer's rounding telemetry per tensor group (ParamGroup), and the
// fractions a step record reports from any telemetry sums: the erased fraction
// and the update/weight ratio.
#pragma once

#include <array>
#include <nlohmann/json.hpp>

#include "kernels/common/adamw.h"
#include "lib/model/param_layout.h"

namespace srkit {

// Indexed by size_t(ParamGroup).
using GroupTelemetry = std::array<AdamWTelemetry, kParamGroupCount>;

// into += part, field by field.
void add_telemetry(AdamWTelemetry& into, const AdamWTelemetry& part);

// Erased updates over nonzero updates (0 when no update was nonzero).
double erased_fraction(const AdamWTelemetry& t);
// rms(update) / rms(weight) = sqrt(update_sq / weight_sq) (0 when the weights are all zero).
double update_weight_ratio(const AdamWTelemetry& t);

// The step record's "groups" object: {"embeddings": {"erased_frac": ..,
// "update_weight_ratio": ..}, ...}, every group.
nlohmann::json groups_json(const GroupTelemetry& groups);

}  // namespace srkit
