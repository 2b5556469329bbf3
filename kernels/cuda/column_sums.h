// Column sums of a row-major matrix on the device (kernels/cuda/column_sums.cu):
// the bias gradient of a linear layer, dbias[OC] (+)= sum over rows of
// dout[N, OC], as kernels/cpu/gemm.cpp's column_sums. Deterministic: a fixed
// partition of the rows (column_sums_partition, kernels/cuda/scratch_sizes.h)
// and a fixed order of every addition, no float atomics.
#pragma once

#include "kernels/common/dtype.h"
#include "kernels/common/grad_write.h"
#include "kernels/cuda/scratch_sizes.h"
#include "kernels/cuda/stream.h"

namespace srkit::cuda {

// dst[c] = RN(base + sum over r of src[r, c]) for c < cols, base = dst[c]
// (kAccumulate) or 0; src is [rows, cols] of src_dt, dst [cols] of dst_dt. Each
// column's rows are added in fp32, in row order within a chunk, then the chunks
// in chunk_sums.cuh's fixed order. scratch: column_sums_scratch_bytes(rows,
// cols) of device memory. Throws std::invalid_argument unless rows, cols > 0.
void column_sums(DType dst_dt, DType src_dt, void* dst, const void* src, int rows, int cols,
                 GradWrite mode, void* scratch, Stream stream);

}  // namespace srkit::cuda
