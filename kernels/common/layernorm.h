// LayerNorm's element expressions (GPT-2's, eps kLayerNormEps), host and
// device: the CPU op (kernels/cpu/layernorm.cpp) and the CUDA kernels
// (kernels/cuda/layernorm.cu) call these, so the two differ only in the order
// their row and column sums run (docs/architecture.md, "One math, two devices").
// Every expression is written in the one operation order both devices keep.
#pragma once

#include <cmath>

#include "kernels/common/hd.h"
#include "kernels/common/math.h"

namespace srkit {

// rstd = 1 / sqrt(sum((x - mean)^2) / C + eps), from the row's sum of squares.
SRKIT_HD float layernorm_rstd(float squares_sum, int C) {
  return 1.0f / sqrtf(squares_sum / float(C) + kLayerNormEps);
}
// norm = (x - mean) * rstd.
SRKIT_HD float layernorm_norm(float x, float mean, float rstd) { return (x - mean) * rstd; }
// out = norm * weight + bias.
SRKIT_HD float layernorm_out(float norm, float weight, float bias) { return norm * weight + bias; }
// dnorm = weight * dout.
SRKIT_HD float layernorm_dnorm(float weight, float dout) { return weight * dout; }
// dx = (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd.
SRKIT_HD float layernorm_dx(float dnorm, float dnorm_mean, float norm, float dnorm_norm_mean,
                            float rstd) {
  return (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd;
}

}  // namespace srkit
