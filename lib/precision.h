// Precision strategies: per component, the storage type and the rounding of
// weights, master weights, gradients and AdamW moments (DESIGN.md, "Precision
// strategies"). A preset is a named value of PrecisionStrategy; a spec string
// "PRESET[:key=value,...]" overrides components of a preset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/adamw.h"
#include "kernels/common/dtype.h"

namespace srkit {

// A strategy is a name and one AdamWRule (kernels/common/adamw.h): the rule is
// the single definition of the storage types and roundings of weights, master
// weights, gradients and moments, shared by the optimizer kernels, the memory
// model and every report.
struct PrecisionStrategy {
  std::string name;  // preset name, or the spec it was parsed from
  AdamWRule rule;    // valid (strategy_from_string checks it)

  // Forward weights; activations and gradients use this dtype too.
  DType weights() const { return rule.weights; }
  // weights + master + grads + m + v (+ kahan), bytes per parameter.
  double bytes_per_param() const;
  // One line, e.g. "w=bf16 master=none g=bf16 m=bf16(rn) v=bf16(rn) update=sr".
  std::string describe() const;
  // Throws std::invalid_argument naming the strategy when the rule is
  // inconsistent (a hand-built value; strategy_from_string returns valid ones).
  void validate() const;
};

// "PRESET[:key=value,...]", keys: w (f32|bf16), master (none|f32|rem16),
// m, v (f32|bf16), update, mround, vround (rn|sr), kahan (on|off).
// Throws std::invalid_argument with a one-line message naming the culprit.
PrecisionStrategy strategy_from_string(const std::string& spec);

// fp32 mixed bf16 bf16-sr bf16-kahan bf16-rem16
const std::vector<std::string>& strategy_preset_names();

}  // namespace srkit
