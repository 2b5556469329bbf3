// Model FLOPs of a training step, the numerator of achieved FLOP/s and MFU.
#pragma once

#include <cstdint>

#include "lib/model/gpt_config.h"

namespace srkit {

// FLOPs of one optimizer step over B sequences of T tokens (forward + backward):
//   6 * N * B * T            N = ParamLayout(config).num_params(): every
//                            parameter, incl. the padded vocabulary rows the
//                            logits GEMM computes; 2 (forward) + 4 (backward)
//                            FLOPs per parameter per token
// + 12 * L * B * T * T * C   attention scores QK^T and the weighted sum AV, each
//                            2*B*T*T*C per layer forward as computed in full
//                            (not halved for the causal mask), times 3 for
//                            forward + backward.
// Element-wise ops (LayerNorm, GELU, softmax, AdamW) are not counted.
double train_step_flops(const GPTConfig& config, int B, int T);

// The same split in two terms, for labels and tests.
struct StepFlops {
  double dense;      // 6 * N * B * T
  double attention;  // 12 * L * B * T^2 * C
  double total() const { return dense + attention; }
};
StepFlops train_step_flops_split(const GPTConfig& config, int B, int T);

}  // namespace srkit
