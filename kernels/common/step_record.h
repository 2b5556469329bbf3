// The one small record each data-parallel rank contributes to an optimizer
// step, and the gradient clip derived from all of them. Both stay on the device
// during the step: the optimizer reads the clip factor there, and the host reads
// the records once, after the step (docs/architecture.md, "The backend: a stream").
//
// A rank's record is `StepRecord::doubles(A)` doubles for A micro-batches:
//   [kSignal]     the stop signal the rank saw (0: none)
//   [kSumSq]      the sum of squares of its shard of the reduced gradients
//   [kLoss0 + k]  the mean loss of its micro-batch k
// The records of all ranks lie back to back in rank order (an all-gather).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/common/hd.h"

namespace srkit {

struct StepRecord {
  static constexpr size_t kSignal = 0;
  static constexpr size_t kSumSq = 1;
  static constexpr size_t kLoss0 = 2;
  // Host and device: grad_clip_from_records runs in a CUDA kernel too.
  static constexpr SRKIT_HD size_t doubles(int accum) { return kLoss0 + size_t(accum); }
};

// What the optimizer applies: the clip factor of the global gradient norm, and
// whether the step may run at all.
struct GradClip {
  double norm;   // sqrt of the ranks' sums of squares, added in rank order
  float scale;   // max_norm / norm when clipping applies (max_norm > 0, norm > max_norm), else 1
  int32_t ok;    // 1 when the norm and every loss are finite; 0: the optimizer leaves
                 // weights and state untouched and the host reports divergence
  int32_t pad_;  // explicit, so the struct has no indeterminate bytes
};

SRKIT_HD bool step_record_finite(double x) {
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
}

// The clip from `world` records of `accum` micro-batches each. One body for the
// CPU backend and the CUDA kernel, so both produce the same bits.
SRKIT_HD GradClip grad_clip_from_records(const double* records, int world, int accum,
                                         float max_norm) {
  const size_t stride = StepRecord::doubles(accum);
  double sumsq = 0.0;
  bool ok = true;
  for (int q = 0; q < world; ++q) {
    const double* r = records + size_t(q) * stride;
    sumsq += r[StepRecord::kSumSq];
    for (int k = 0; k < accum; ++k) ok = ok && step_record_finite(r[StepRecord::kLoss0 + k]);
  }
  GradClip c{};
  c.norm = sqrt(sumsq);
  c.ok = (ok && step_record_finite(c.norm)) ? 1 : 0;
  c.scale = 1.0f;
  if (max_norm > 0.0f && c.norm > double(max_norm)) c.scale = float(double(max_norm) / c.norm);
  return c;
}

}  // namespace srkit
