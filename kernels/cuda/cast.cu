#include <algorithm>

#include "kernels/common/bf16.h"
#include "kernels/common/sr_bits.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/elements.cuh"
#include "kernels/cuda/launch.cuh"

namespace srkit::cuda {
namespace {

// Casts walk their arrays in 8-element chunks, a thread a chunk per trip of
// a grid-stride loop: with both arrays 16-byte aligned a whole chunk moves
// with 128-bit accesses (a warp reads 1 KiB of fp32 or 512 B of bf16 per
// access), else, and for the last partial chunk, element by element. Each
// element is rounded by the same function either way.
// in -> out as load_f32 then store_f32 (elements.cuh): widening is exact,
// narrowing rounds to nearest even.
template <typename In, typename Out>
__global__ void convert_kernel(const In* __restrict__ in, Out* __restrict__ out, size_t n,
                               bool vector) {
  const size_t chunks = (n + kChunk - 1) / kChunk;
  for (size_t c = grid_thread_index(); c < chunks; c += grid_thread_count()) {
    const size_t i0 = c * kChunk;
    if (vector && i0 + kChunk <= n) {
      float x[kChunk];
      load8_aligned(in + i0, x);
      store8_aligned(out + i0, x);
    } else {
      for (size_t i = i0; i < n && i < i0 + kChunk; ++i) store_f32(out + i, load_f32(in + i));
    }
  }
}

// One launch of convert_kernel over n elements.
template <typename In, typename Out>
void convert(const In* in, Out* out, size_t n, Stream stream, const char* name) {
  if (n == 0) return;
  launch(convert_kernel<In, Out>, grid_stride_blocks((n + kChunk - 1) / kChunk), kGridStrideThreads,
         0, stream, name, in, out, n, aligned16(in) && aligned16(out));
}

// A thread takes one Philox group (8 elements at a group boundary of the
// global index) per trip: it draws the group's block and rounds each element
// with its lane. Groups run from first_group; elements outside
// [base_index, base_index + n) are skipped. vector: base_index is a group
// boundary and both arrays are 16-byte aligned, so a group wholly inside the
// range is one chunk at a 16-byte boundary.
__global__ void sr_kernel(const float* __restrict__ in, bf16* __restrict__ out, size_t n,
                          uint64_t seed, RngPurpose purpose, uint64_t step, uint64_t base_index,
                          uint64_t first_group, uint64_t groups, bool vector) {
  for (uint64_t t = grid_thread_index(); t < groups; t += grid_thread_count()) {
    const uint64_t group = first_group + t;
    const Philox4 block = sr_block(seed, purpose, step, group);
    const uint64_t g0 = group * kSrElementsPerPhilox;
    if (vector && g0 >= base_index && g0 - base_index + kChunk <= n) {
      const size_t i0 = size_t(g0 - base_index);
      float x[kChunk];
      bf16 y[kChunk];
      load8_aligned(in + i0, x);
      for (int k = 0; k < kChunk; ++k) y[k] = float_to_bf16_sr(x[k], sr_lane(block, unsigned(k)));
      store8_raw(out + i0, y);
    } else {
      for (int k = 0; k < kSrElementsPerPhilox; ++k) {
        const uint64_t global = g0 + uint64_t(k);
        if (global >= base_index && global - base_index < n) {
          const size_t i = size_t(global - base_index);
          out[i] = float_to_bf16_sr(in[i], sr_lane(block, unsigned(k)));
        }
      }
    }
  }
}

}  // namespace

void cast_f32_to_bf16_rn(const float* in, bf16* out, size_t n, Stream stream) {
  convert(in, out, n, stream, "cast_f32_to_bf16_rn");
}

void cast_bf16_to_f32(const bf16* in, float* out, size_t n, Stream stream) {
  convert(in, out, n, stream, "cast_bf16_to_f32");
}

void cast_f32_to_bf16_sr(const float* in, bf16* out, size_t n, uint64_t seed, RngPurpose purpose,
                         uint64_t step, uint64_t base_index, Stream stream) {
  check_sr_step("cuda::cast_f32_to_bf16_sr", step);
  if (n == 0) return;
  const uint64_t first_group = base_index / kSrElementsPerPhilox;
  const uint64_t end_group = (base_index + n + kSrElementsPerPhilox - 1) / kSrElementsPerPhilox;
  const uint64_t groups = end_group - first_group;
  launch(sr_kernel, grid_stride_blocks(groups), kGridStrideThreads, 0, stream,
         "cast_f32_to_bf16_sr", in, out, n, seed, purpose, step, base_index, first_group, groups,
         base_index % kSrElementsPerPhilox == 0 && aligned16(in) && aligned16(out));
}

}  // namespace srkit::cuda
