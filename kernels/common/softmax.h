// Softmax's element expressions, host and device: the CPU's cross-entropy,
// sampling softmax and attention (kernels/cpu/loss.cpp, attention.cpp) and the
// CUDA kernels (kernels/cuda/loss.cu, attention.cu) call these, so the two
// devices differ only in the order their row sums run (docs/architecture.md,
// "One math, two devices"). The maximum is subtracted before exp_poly.
#pragma once

#include <cmath>

#include "kernels/common/hd.h"
#include "kernels/common/math.h"

namespace srkit {

// A row's term of the normalizer: exp(x - max).
SRKIT_HD float softmax_term(float x, float max) { return exp_poly(x - max); }
// A probability from the reciprocal of the row's sum: exp(x - max) * (1 / sum).
SRKIT_HD float softmax_prob(float x, float max, float inv_sum) {
  return exp_poly(x - max) * inv_sum;
}
// -log softmax[target] = log(sum) - (l[target] - max).
SRKIT_HD float crossentropy_loss(float sum, float target_logit, float max) {
  return logf(sum) - (target_logit - max);
}
// Attention's score scale, 1 / sqrt(head size).
SRKIT_HD float attention_scale(int head_size) { return 1.0f / sqrtf(float(head_size)); }

}  // namespace srkit
