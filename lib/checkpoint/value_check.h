// The value check a checkpoint's tensors pass on load: weights and optimizer
// state must be finite, and Adam's second moment also non-negative. A NaN or an
// Inf in a saved state would otherwise resume into a run that diverges at once
// (or, in v, into sqrt of a negative number), far from the cause.
#pragma once

#include <cstddef>

#include "kernels/common/dtype.h"

namespace srkit {

struct BadValue {
  size_t index;     // n when every value is good
  bool non_finite;  // NaN or +-Inf; otherwise a negative number
};

// The first of n values of dtype (f32 or bf16 bits) that is NaN or +-Inf, or,
// with non_negative, below zero (-0 counts as zero). Reads the bits only, in
// one branch-free pass per block that the compiler vectorises; only a block
// holding a bad value is searched for the index, so a good tensor costs one
// pass at memory speed.
BadValue first_bad_value(DType dtype, const void* data, size_t n, bool non_negative);

}  // namespace srkit
