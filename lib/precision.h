// Precision strategies: per component, the storage type and the rounding of
// weights, master weights, gradients and AdamW moments (docs/architecture.md,
// "Precision strategies"). A preset is a named value of PrecisionStrategy; a spec string
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
  // The dtype of activations and of the weights and gradients the forward and
  // backward passes use. Equal to rule.weights except in PyTorch-AMP-style "O1"
  // mixed precision (the amp preset): fp32 weights, gradients and state, with a
  // bf16 copy of the weights made for every forward and bf16 gradients widened
  // into the fp32 ones after every backward.
  DType compute = DType::kBF16;

  // The stored weights and gradients (what the optimizer steps).
  DType weights() const { return rule.weights; }
  DType grads() const { return rule.grads; }
  bool casts_for_compute() const { return compute != rule.weights; }
  // weights + master + grads + m + v (+ kahan), bytes per parameter.
  double bytes_per_param() const;
  // The compute copies of weights and gradients (casts_for_compute), bytes per
  // parameter; 0 otherwise.
  double transient_bytes_per_param() const;
  // One line, e.g. "w=bf16 master=none g=bf16 m=bf16(rn) v=bf16(rn) update=sr".
  std::string describe() const;
  // Throws std::invalid_argument naming the strategy when the rule is
  // inconsistent (a hand-built value; strategy_from_string returns valid ones).
  void validate() const;
};

// "PRESET[:key=value,...]", keys: w (f32|bf16), g (f32|bf16: the gradients,
// the weights' dtype unless given; f32 with bf16 weights stores the weight
// gradients unrounded), master (none|f32|rem16), m, v (f32|bf16), update,
// mround, vround (rn|sr), kahan (on|off), compute (f32|bf16; bf16 with f32
// weights is O1 mixed precision).
// Throws std::invalid_argument with a one-line message naming the culprit.
PrecisionStrategy strategy_from_string(const std::string& spec);

// fp32 mixed bf16 bf16-sr bf16-kahan bf16-rem16 amp
const std::vector<std::string>& strategy_preset_names();

}  // namespace srkit
