// Column sums (kernels/cuda/column_sums.h), in two passes.
//
// Chunk sums: block (x, y) takes row chunk y of column_sums_partition and
// kGroupThreads 8-column groups of it. A thread owns one group: it walks the
// chunk's rows in order, keeping kRowsInFlight rows' loads in flight (16
// bf16 rows of one 128-bit load each, or 8 fp32 rows of two: 64 registers
// either way) before it adds them, and writes its 8 sums to the chunk's row of
// the scratch. A warp reads 512 (bf16) or 1024 (fp32) consecutive bytes of a
// row. Groups of a matrix whose width is not a multiple of 8, or whose
// pointers are not 16-byte aligned, load element by element: the same values
// added in the same order, so the bits do not depend on the alignment.
//
// Store: sum_chunk_columns (kernels/cuda/chunk_sums.cuh) adds each column's
// chunk sums in its fixed order and one rounding stores RN(base + total).
//
// Before, a thread summed one column (a 2-byte load per row for bf16) and one
// thread a column then added the up to 256 chunk sums one after another;
// the chunk sums keep their bits, the final order is new.
#include <string>

#include "kernels/cuda/chunk_sums.cuh"
#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/elements.cuh"
#include "kernels/cuda/launch.cuh"

namespace srkit::cuda {
namespace {

constexpr int kGroupThreads = 64;  // 512 columns a block: little idle at OC = 768, 2304, 3072

template <typename T>
constexpr int kRowsInFlight = 16 / RawChunk<T>::kWords;

template <typename T, bool kVec>
__global__ void __launch_bounds__(kGroupThreads)
    column_chunk_sums_kernel(const T* __restrict__ src, int rows, int cols, int rows_per_chunk,
                             float* __restrict__ partial) {
  const int c0 = (int(blockIdx.x) * kGroupThreads + int(threadIdx.x)) * kChunk;
  if (c0 >= cols) return;  // no barrier or warp call follows
  const int len = cols - c0 < kChunk ? cols - c0 : kChunk;
  const int r0 = int(blockIdx.y) * rows_per_chunk;
  const int r1 = rows - r0 < rows_per_chunk ? rows : r0 + rows_per_chunk;
  float acc[kChunk] = {};
  add_rows<kRowsInFlight<T>, kVec, T>(
      [&](int i) { return src + size_t(r0 + i) * size_t(cols) + size_t(c0); }, r1 - r0, len, acc);
  store_chunk<kVec>(partial + size_t(blockIdx.y) * size_t(cols) + size_t(c0), len, acc);
}

template <typename T>
__global__ void __launch_bounds__(kChunkSumThreads)
    column_sums_store_kernel(T* __restrict__ dst, const float* __restrict__ partial, int chunks,
                             int cols, bool accumulate) {
  sum_chunk_columns(partial, chunks, cols, [&](int j, float total) {
    store_f32(dst + j, grad_base(dst[j], accumulate) + total);
  });
}

}  // namespace

void column_sums(DType dst_dt, DType src_dt, void* dst, const void* src, int rows, int cols,
                 GradWrite mode, void* scratch, Stream stream) {
  check_shape(rows > 0 && cols > 0, "column_sums",
              "rows=" + std::to_string(rows) + " cols=" + std::to_string(cols), "both > 0");
  const ColumnSumsPartition part = column_sums_partition(rows, cols);
  auto* partial = static_cast<float*>(scratch);
  const bool vec = cols % kChunk == 0 && aligned16(src) && aligned16(partial);
  const int groups = (cols + kChunk - 1) / kChunk;
  const dim3 grid(unsigned((groups + kGroupThreads - 1) / kGroupThreads), unsigned(part.chunks));
  with_dtype(src_dt, [&](auto tag) {
    using S = decltype(tag);
    auto kernel = vec ? column_chunk_sums_kernel<S, true> : column_chunk_sums_kernel<S, false>;
    launch(kernel, grid, kGroupThreads, 0, stream, "column_sums (chunks)",
           static_cast<const S*>(src), rows, cols, part.rows_per_chunk, partial);
  });
  with_dtype(dst_dt, [&](auto tag) {
    using D = decltype(tag);
    launch(column_sums_store_kernel<D>, chunk_sum_blocks(cols), kChunkSumThreads, 0, stream,
           "column_sums (store)", static_cast<D*>(dst), partial, part.chunks, cols,
           mode == GradWrite::kAccumulate);
  });
}

}  // namespace srkit::cuda
