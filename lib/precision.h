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

enum class Rounding : uint8_t { kNearest, kStochastic };
// MasterKind (none | f32 | rem16) is the kernel-level enum of kernels/common/adamw.h.

struct PrecisionStrategy {
  std::string name;              // preset name, or the spec it was parsed from
  DType weights = DType::kBF16;  // forward weights; activations and gradients use this dtype too
  MasterKind master = MasterKind::kNone;
  DType m = DType::kBF16, v = DType::kBF16;
  Rounding weight_rounding = Rounding::kStochastic;  // bf16 weights without master
  Rounding m_rounding = Rounding::kNearest, v_rounding = Rounding::kNearest;
  bool kahan = false;  // bf16 compensation buffer

  // weights + master + grads + m + v (+ kahan), bytes per parameter.
  double bytes_per_param() const;
  // One line, e.g. "w=bf16 master=none g=bf16 m=bf16(rn) v=bf16(rn) update=sr".
  std::string describe() const;
  // The kernel-level encoding; throws std::invalid_argument if inconsistent.
  AdamWRule rule() const;
};

// "PRESET[:key=value,...]", keys: w (f32|bf16), master (none|f32|rem16),
// m, v (f32|bf16), update, mround, vround (rn|sr), kahan (on|off).
// Throws std::invalid_argument with a one-line message naming the culprit.
PrecisionStrategy strategy_from_string(const std::string& spec);

// fp32 mixed bf16 bf16-sr bf16-kahan bf16-rem16
const std::vector<std::string>& strategy_preset_names();

}  // namespace srkit
