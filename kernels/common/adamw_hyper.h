// The bias correction of AdamW's moments, the one arithmetic every builder of
// an AdamWHyper (kernels/common/adamw.h) shares: the optimizer driver
// (lib/train/optimizer.cpp, which the shadow-FP32 probe uses too) and the C ABI
// (python/csrc), so a step driven from outside stores sr-train's bits.
#pragma once

#include <cmath>
#include <cstdint>

namespace srkit {

// 1 - beta^step of a 1-based step: computed in double, then rounded once to float.
inline float adamw_bias_correction(float beta, uint64_t step) {
  return float(1.0 - std::pow(double(beta), double(step)));
}

}  // namespace srkit
