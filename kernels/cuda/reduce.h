// Reductions whose results stay on the device (kernels/cuda/reduce.cu):
// deterministic (fixed partition and order, no float atomics).
#pragma once

#include <cstddef>

#include "kernels/common/dtype.h"
#include "kernels/common/step_record.h"
#include "kernels/cuda/scratch_sizes.h"
#include "kernels/cuda/stream.h"

namespace srkit::cuda {

// Device scratch sum_squares needs for n elements (its partial sums):
// sum_squares_scratch_bytes of kernels/cuda/scratch_sizes.h.
// *out = sum of x[i]^2 in fp64.
void sum_squares(DType dt, const void* x, size_t n, double* out, void* scratch, Stream stream);

// *out = grad_clip_from_records(records, world, accum, max_norm)
// (kernels/common/step_record.h): the same bits as the CPU.
void grad_clip(const double* records, int world, int accum, float max_norm, GradClip* out,
               Stream stream);

}  // namespace srkit::cuda
