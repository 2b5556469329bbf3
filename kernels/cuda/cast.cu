#include <algorithm>

#include "kernels/common/bf16.h"
#include "kernels/common/sr_bits.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/launch.cuh"

namespace srkit::cuda {
namespace {

__global__ void rn_kernel(const float* __restrict__ in, bf16* __restrict__ out, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    out[i] = float_to_bf16_rn(in[i]);
  }
}

__global__ void widen_kernel(const bf16* __restrict__ in, float* __restrict__ out, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    out[i] = bf16_to_float(in[i]);
  }
}

// A block handles spans of kGridStrideThreads Philox groups (8 * kGridStrideThreads elements):
// each thread draws one group's block into shared memory, then the threads
// walk the span element by element (coalesced loads and stores), each taking
// its element's lane. Spans start at a group boundary (global index
// first_group * 8); elements outside [base_index, base_index + n) are skipped.
__global__ void sr_kernel(const float* __restrict__ in, bf16* __restrict__ out, size_t n,
                          uint64_t seed, RngPurpose purpose, uint64_t step, uint64_t base_index,
                          uint64_t first_group, uint64_t groups) {
  __shared__ Philox4 blocks[kGridStrideThreads];
  constexpr uint64_t kSpan = uint64_t(kGridStrideThreads) * kSrElementsPerPhilox;
  for (uint64_t span = blockIdx.x; span * kGridStrideThreads < groups; span += gridDim.x) {
    const uint64_t group = first_group + span * kGridStrideThreads + threadIdx.x;
    blocks[threadIdx.x] = sr_block(seed, purpose, step, group);
    __syncthreads();
    const uint64_t span_start = (first_group + span * kGridStrideThreads) * kSrElementsPerPhilox;
    for (unsigned e = threadIdx.x; e < kSpan; e += kGridStrideThreads) {
      const uint64_t global = span_start + e;
      if (global >= base_index && global - base_index < n) {
        const size_t i = size_t(global - base_index);
        out[i] = float_to_bf16_sr(
            in[i], sr_lane(blocks[e / kSrElementsPerPhilox], e % kSrElementsPerPhilox));
      }
    }
    __syncthreads();
  }
}

}  // namespace

void cast_f32_to_bf16_rn(const float* in, bf16* out, size_t n, Stream stream) {
  if (n == 0) return;
  launch(rn_kernel, grid_stride_blocks(n), kGridStrideThreads, 0, stream, "cast_f32_to_bf16_rn", in,
         out, n);
}

void cast_bf16_to_f32(const bf16* in, float* out, size_t n, Stream stream) {
  if (n == 0) return;
  launch(widen_kernel, grid_stride_blocks(n), kGridStrideThreads, 0, stream, "cast_bf16_to_f32", in,
         out, n);
}

void cast_f32_to_bf16_sr(const float* in, bf16* out, size_t n, uint64_t seed, RngPurpose purpose,
                         uint64_t step, uint64_t base_index, Stream stream) {
  check_sr_step("cuda::cast_f32_to_bf16_sr", step);
  if (n == 0) return;
  const uint64_t first_group = base_index / kSrElementsPerPhilox;
  const uint64_t end_group = (base_index + n + kSrElementsPerPhilox - 1) / kSrElementsPerPhilox;
  const uint64_t groups = end_group - first_group;
  launch(sr_kernel, grid_stride_blocks(groups), kGridStrideThreads, 0, stream,
         "cast_f32_to_bf16_sr", in, out, n, seed, purpose, step, base_index, first_group, groups);
}

}  // namespace srkit::cuda
