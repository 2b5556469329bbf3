// Reductions whose results stay on the device (kernels/cuda/reduce.h).
//
// sum_squares: two passes, deterministic for any device. The array is cut
// into fixed chunks of kChunkElems elements; a block sums a chunk in fp64
// (thread t takes the 8-element groups t, t + 256, ... of the chunk, each in
// element order: 128-bit loads when the array is aligned, the same values in
// the same order when it is not; then block_sum in its fixed order) into the
// caller's scratch, and one block adds the chunk sums in a fixed order. 32K
// elements a chunk gives ~3800 blocks for GPT-2 124M's gradients: enough to
// fill 132 SMs, and the second pass reads only 30 KB.
//
// grad_clip: one thread runs grad_clip_from_records (kernels/common/
// step_record.h), the body the CPU backend runs: the same bits.
#include <algorithm>

#include "kernels/cuda/elements.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/scratch_sizes.h"
#include "kernels/cuda/warp.cuh"

namespace srkit::cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kGroupsPerThread = 16;
constexpr size_t kChunkElems = kChunk * kThreads * kGroupsPerThread;
static_assert(kChunkElems == kSumSquaresChunk, "kernels/cuda/scratch_sizes.h sizes the scratch");
constexpr unsigned kMaxBlocks = 65535;

size_t chunks_of(size_t n) { return sum_squares_chunks(n); }

template <typename T, bool kVec>
__global__ void __launch_bounds__(kThreads)
    sum_squares_chunks_kernel(const T* x, size_t n, size_t chunks, double* partial) {
  for (size_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {  // uniform per block
    const size_t begin = chunk * kChunkElems;
    const size_t end = n - begin < kChunkElems ? n : begin + kChunkElems;
    double s = 0.0;
    for (size_t i0 = begin + size_t(threadIdx.x) * kChunk; i0 < end; i0 += kThreads * kChunk) {
      const int len = chunk_len(end, i0);
      float v[kChunk];
      if (kVec && len == kChunk) {
        load8_aligned(x + i0, v);
      } else {
        load_chunk<false>(x + i0, len, v);
      }
      for (int k = 0; k < len; ++k) {
        const double d = v[k];
        s += d * d;
      }
    }
    s = block_sum(s);
    if (threadIdx.x == 0) partial[chunk] = s;
  }
}

// *out = partial[0] + ... in a fixed order (0 for no chunks).
__global__ void __launch_bounds__(kThreads)
    sum_partials_kernel(const double* partial, size_t chunks, double* out) {
  double s = 0.0;
  for (size_t i = threadIdx.x; i < chunks; i += kThreads) s += partial[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *out = s;
}

__global__ void grad_clip_kernel(const double* records, int world, int accum, float max_norm,
                                 GradClip* out) {
  *out = grad_clip_from_records(records, world, accum, max_norm);
}

}  // namespace

void sum_squares(DType dt, const void* x, size_t n, double* out, void* scratch, Stream stream) {
  const size_t chunks = chunks_of(n);
  auto* partial = static_cast<double*>(scratch);
  if (chunks > 0) {
    const unsigned blocks = unsigned(std::min<size_t>(chunks, kMaxBlocks));
    with_dtype(dt, [&](auto tag) {
      using S = decltype(tag);
      auto kernel =
          aligned16(x) ? sum_squares_chunks_kernel<S, true> : sum_squares_chunks_kernel<S, false>;
      launch(kernel, blocks, kThreads, 0, stream, "sum_squares", static_cast<const S*>(x), n,
             chunks, partial);
    });
  }
  launch(sum_partials_kernel, 1, kThreads, 0, stream, "sum_squares (chunk sums)", partial, chunks,
         out);
}

void grad_clip(const double* records, int world, int accum, float max_norm, GradClip* out,
               Stream stream) {
  launch(grad_clip_kernel, 1, 1, 0, stream, "grad_clip", records, world, accum, max_norm, out);
}

}  // namespace srkit::cuda
