// LayerNorm forward, the fused residual + LayerNorm, and backward
// (kernels/cuda/layernorm.h). Element expressions are the CPU's
// (kernels/cpu/layernorm.cpp); the reductions run in an order of their own,
// fixed by the shape alone, so results are the same bits run to run.
//
// Rows (forward, the fused forward, backward's dinp): one warp per row, 8
// warps (256 threads) a block. Lane l owns the 8-column chunks l, l + 32,
// l + 64, ... of its row and sums them in column order, then the warp adds the
// 32 lane sums by a butterfly (warp_sum): no shared memory and no block
// barrier, and a row of GPT-2's C = 768 (bf16) is 3 chunks a lane, each one
// 128-bit load when the row is 16-byte aligned. The forward passes (mean,
// variance, output) run over the lane's chunks held in registers for C <= 1024
// (one read of the row, every load of it in flight at once); wider rows read
// them again at each pass (those reads hit L1/L2). Blocks loop over
// groups of 8 rows so that every warp of a block runs the same shuffles (a
// warp past the last row runs them on no data and stores nothing).
//
// Parameter gradients (dweight, dbias): deterministic without atomics. The N
// rows are cut into at most kLayernormChunks fixed chunks of consecutive rows
// (kernels/cuda/scratch_sizes.h), each chunk's sums go to the caller's
// scratch, and a last kernel adds the chunk sums of each column in a fixed
// order (kernels/cuda/chunk_sums.cuh: 8 segments of consecutive chunks, then
// the segments) and rounds once into the stored gradient, RN(base + sum), as
// the CPU does.
// Where C <= 1024 the chunk sums come from the dinp kernel itself (fused: one
// block a chunk, each lane summing its columns over its warp's rows in
// registers, the warps added in order), so the rows are read once; wider rows
// read them again in a partials kernel, one thread per column (a warp reads 32
// consecutive columns of a row: coalesced), rows in order.
#include <algorithm>
#include <cmath>

#include "kernels/common/layernorm.h"
#include "kernels/cuda/chunk_sums.cuh"
#include "kernels/cuda/elements.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/scratch_sizes.h"
#include "kernels/cuda/warp.cuh"

namespace srkit::cuda {
namespace {

constexpr int kRowWarps = 8;
constexpr int kRowThreads = kRowWarps * kWarpSize;
constexpr size_t kMaxRowBlocks = 8192;

// The unfused parameter partials: one thread per column.
constexpr int kParamThreads = 128;

unsigned row_blocks(int N) {
  return unsigned(std::min(kMaxRowBlocks, (size_t(N) + kRowWarps - 1) / kRowWarps));
}

// The 8-column chunks a lane of a row's warp takes.
int lane_chunks_of(int C) { return ((C + kChunk - 1) / kChunk + kWarpSize - 1) / kWarpSize; }

// A lane's chunks of a row, ch = lane + 32 j: with kLaneChunks > 0 the loop is
// unrolled over j < kLaneChunks (j a constant, so per-chunk sums stay in
// registers), else a plain loop (j unused). f(ch, j).
template <int kLaneChunks, typename F>
__device__ __forceinline__ void for_lane_chunks(int lane, int chunks, F&& f) {
  if constexpr (kLaneChunks > 0) {
    for (int j = 0; j < kLaneChunks; ++j) {  // a constant trip count <= 4: unrolled fully
      const int ch = lane + kWarpSize * j;
      if (ch < chunks) f(ch, j);
    }
  } else {
    for (int ch = lane; ch < chunks; ch += kWarpSize) f(ch, 0);
  }
}

// ---- forward -----------------------------------------------------------------------
// A lane's chunks of one row as floats. kLaneChunks > 0 (C <= 256 kLaneChunks):
// held in registers once filled, so the row is read from memory once;
// kLaneChunks 0: not held, and each pass reads the chunks from `row` again
// (those reads hit L1/L2).
template <typename T, bool kVec, int kLaneChunks>
struct LaneRow {
  const T* row;
  float v[kLaneChunks][kChunk];
  __device__ __forceinline__ void hold(int j, const float (&x)[kChunk]) {
    for (int k = 0; k < kChunk; ++k) v[j][k] = x[k];
  }
  __device__ __forceinline__ void get(int, int j, int, float (&x)[kChunk]) const {
    for (int k = 0; k < kChunk; ++k) x[k] = v[j][k];
  }
};
template <typename T, bool kVec>
struct LaneRow<T, kVec, 0> {
  const T* row;
  __device__ __forceinline__ void hold(int, const float (&)[kChunk]) {}
  __device__ __forceinline__ void get(int ch, int, int n, float (&x)[kChunk]) const {
    load_chunk<kVec>(row + ch * kChunk, n, x);
  }
};

// The rows whose chunks a lane can hold: C <= 1024 (GPT-2 124M and 350M).
constexpr int kHeldLaneChunks = 4;

// One row from its lane chunks: out = ((x - mean) * rstd) * weight + bias,
// mean and rstd in fp32 (the CPU's expressions), each sum in column order
// within a lane, then warp_sum. chunks 0: the warp has no row; it still runs
// every shuffle and writes nothing.
template <typename T, bool kVec, int kLaneChunks>
__device__ __forceinline__ void layernorm_row(const LaneRow<T, kVec, kLaneChunks>& x, T* out,
                                              float* mean, float* rstd, const T* weight,
                                              const T* bias, int C, int chunks) {
  const int lane = lane_id();
  float sum = 0.0f;
  for_lane_chunks<kLaneChunks>(lane, chunks, [&](int ch, int j) {
    const int n = chunk_len(size_t(C), size_t(ch) * kChunk);
    float v[kChunk];
    x.get(ch, j, n, v);
    for (int k = 0; k < kChunk; ++k) {
      if (k < n) sum += v[k];
    }
  });
  const float m = warp_sum(sum) / float(C);
  float sq = 0.0f;
  for_lane_chunks<kLaneChunks>(lane, chunks, [&](int ch, int j) {
    const int n = chunk_len(size_t(C), size_t(ch) * kChunk);
    float v[kChunk];
    x.get(ch, j, n, v);
    for (int k = 0; k < kChunk; ++k) {
      if (k < n) {
        const float d = v[k] - m;
        sq += d * d;
      }
    }
  });
  const float s = layernorm_rstd(warp_sum(sq), C);
  for_lane_chunks<kLaneChunks>(lane, chunks, [&](int ch, int j) {
    const int c0 = ch * kChunk;
    const int n = chunk_len(size_t(C), size_t(c0));
    float v[kChunk], w[kChunk], b[kChunk];
    x.get(ch, j, n, v);
    load_chunk<kVec>(weight + c0, n, w);
    load_chunk<kVec>(bias + c0, n, b);
    for (int k = 0; k < kChunk; ++k) v[k] = layernorm_out(layernorm_norm(v[k], m, s), w[k], b[k]);
    store_chunk<kVec>(out + c0, n, v);
  });
  if (chunks > 0 && lane == 0) {
    *mean = m;
    *rstd = s;
  }
}

template <typename T, bool kVec, int kLaneChunks>
__global__ void __launch_bounds__(kRowThreads)
    layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                             const T* bias, int N, int C) {
  const int lane = lane_id();
  for (size_t base = size_t(blockIdx.x) * kRowWarps; base < size_t(N);
       base += size_t(gridDim.x) * kRowWarps) {
    const size_t row = base + size_t(warp_id());
    const bool valid = row < size_t(N);
    const size_t off = valid ? row * size_t(C) : 0;
    const int chunks = valid ? (C + kChunk - 1) / kChunk : 0;
    LaneRow<T, kVec, kLaneChunks> x{inp + off};
    if constexpr (kLaneChunks > 0) {  // one read of the row, all its loads in flight
      for_lane_chunks<kLaneChunks>(lane, chunks, [&](int ch, int j) {
        float v[kChunk];
        load_chunk<kVec>(inp + off + ch * kChunk, chunk_len(size_t(C), size_t(ch) * kChunk), v);
        x.hold(j, v);
      });
    }
    layernorm_row(x, out + off, mean + (valid ? row : 0), rstd + (valid ? row : 0), weight, bias, C,
                  chunks);
  }
}

// residual = RN(a + b), stored, then layernorm_row on the stored residual's
// values: held in registers as rounded (kLaneChunks > 0), or read back by the
// lane that wrote them (the same ownership of chunks), so every bit equals
// residual_forward + layernorm_forward.
template <typename T, bool kVec, int kLaneChunks>
__global__ void __launch_bounds__(kRowThreads)
    residual_layernorm_kernel(T* residual, T* out, float* mean, float* rstd, const T* a, const T* b,
                              const T* weight, const T* bias, int N, int C) {
  const int lane = lane_id();
  for (size_t base = size_t(blockIdx.x) * kRowWarps; base < size_t(N);
       base += size_t(gridDim.x) * kRowWarps) {
    const size_t row = base + size_t(warp_id());
    const bool valid = row < size_t(N);
    const size_t off = valid ? row * size_t(C) : 0;
    const int chunks = valid ? (C + kChunk - 1) / kChunk : 0;
    LaneRow<T, kVec, kLaneChunks> x{residual + off};
    for_lane_chunks<kLaneChunks>(lane, chunks, [&](int ch, int j) {
      const size_t c0 = off + size_t(ch) * kChunk;
      const int n = chunk_len(size_t(C), size_t(ch) * kChunk);
      float xa[kChunk], xb[kChunk];
      load_chunk<kVec>(a + c0, n, xa);
      load_chunk<kVec>(b + c0, n, xb);
      for (int k = 0; k < kChunk; ++k) xa[k] = widen(from_f32<T>(xa[k] + xb[k]));
      store_chunk<kVec>(residual + c0, n, xa);
      x.hold(j, xa);
    });
    layernorm_row(x, out + off, mean + (valid ? row : 0), rstd + (valid ? row : 0), weight, bias, C,
                  chunks);
  }
}

// ---- backward ----------------------------------------------------------------------
// A lane's running sums of the parameter gradients over the rows its warp
// took, for the columns of its kLaneChunks chunks: norm * dout (dweight) and
// dout (dbias), rows in order. kLaneChunks 0: none kept (the unfused path).
template <int kLaneChunks>
struct LaneParamSums {
  float dw[kLaneChunks][kChunk] = {};
  float db[kLaneChunks][kChunk] = {};
  __device__ __forceinline__ void add(int j, int k, float norm, float dout) {
    dw[j][k] += norm * dout;
    db[j][k] += dout;
  }
};
template <>
struct LaneParamSums<0> {
  __device__ __forceinline__ void add(int, int, float, float) {}
};

// dinp of one row: with norm = (x - mean) * rstd and dnorm = weight * dout,
// dx = ((dnorm - mean(dnorm)) - norm * mean(dnorm * norm)) * rstd, stored as
// RN(base + dx) (the CPU's expressions); the row's terms of the parameter
// gradients go to `sums`. chunks 0: a warp without a row (it still runs the
// shuffles and touches nothing).
template <typename T, bool kVec, bool kAccumulate, int kLaneChunks>
__device__ __forceinline__ void layernorm_dinp_row(T* dx, const T* g, const T* x, const T* weight,
                                                   float m, float s, int C, int chunks,
                                                   LaneParamSums<kLaneChunks>& sums) {
  const int lane = lane_id();
  float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
  for_lane_chunks<kLaneChunks>(lane, chunks, [&](int ch, int j) {
    const int c0 = ch * kChunk;
    const int n = chunk_len(size_t(C), size_t(c0));
    float xv[kChunk], gv[kChunk], wv[kChunk];
    load_chunk<kVec>(x + c0, n, xv);
    load_chunk<kVec>(g + c0, n, gv);
    load_chunk<kVec>(weight + c0, n, wv);
    for (int k = 0; k < kChunk; ++k) {  // k < n, with k a constant once unrolled
      if (k < n) {
        const float norm = layernorm_norm(xv[k], m, s);
        const float dnorm = layernorm_dnorm(wv[k], gv[k]);
        dnorm_sum += dnorm;
        dnorm_norm_sum += dnorm * norm;
        sums.add(j, k, norm, gv[k]);
      }
    }
  });
  const float dnorm_mean = warp_sum(dnorm_sum) / float(C);
  const float dnorm_norm_mean = warp_sum(dnorm_norm_sum) / float(C);
  for_lane_chunks<kLaneChunks>(lane, chunks, [&](int ch, int) {
    const int c0 = ch * kChunk;
    const int n = chunk_len(size_t(C), size_t(c0));
    float xv[kChunk], gv[kChunk], wv[kChunk], old[kChunk] = {};
    load_chunk<kVec>(x + c0, n, xv);
    load_chunk<kVec>(g + c0, n, gv);
    load_chunk<kVec>(weight + c0, n, wv);
    if (kAccumulate) load_chunk<kVec>(dx + c0, n, old);
    for (int k = 0; k < kChunk; ++k) {
      const float norm = layernorm_norm(xv[k], m, s);
      const float dnorm = layernorm_dnorm(wv[k], gv[k]);
      const float d = layernorm_dx(dnorm, dnorm_mean, norm, dnorm_norm_mean, s);
      old[k] = (kAccumulate ? old[k] : 0.0f) + d;
    }
    store_chunk<kVec>(dx + c0, n, old);
  });
}

// The unfused path (C > 1024, more lane chunks than kFusedMaxLaneChunks): dinp
// only, rows in groups of 8; the partials kernel below reads the rows again.
template <typename T, bool kVec, bool kAccumulate>
__global__ void __launch_bounds__(kRowThreads)
    layernorm_backward_dinp_kernel(T* dinp, const T* dout, const T* inp, const T* weight,
                                   const float* mean, const float* rstd, int N, int C) {
  LaneParamSums<0> none;
  for (size_t base = size_t(blockIdx.x) * kRowWarps; base < size_t(N);
       base += size_t(gridDim.x) * kRowWarps) {
    const size_t row = base + size_t(warp_id());
    const bool valid = row < size_t(N);
    const size_t off = valid ? row * size_t(C) : 0;
    const int chunks = valid ? (C + kChunk - 1) / kChunk : 0;
    layernorm_dinp_row<T, kVec, kAccumulate, 0>(dinp + off, dout + off, inp + off, weight,
                                                valid ? mean[row] : 0.0f, valid ? rstd[row] : 0.0f,
                                                C, chunks, none);
  }
}

// The fused path: dinp and the parameter partials from one read of the rows.
// Block b takes row chunk b of layernorm_partition (the grid is its chunk
// count), warp w its rows r0 + w, r0 + w + 8, ...; each lane keeps its
// columns' sums in registers, then the warps add them into shared memory
// (2C floats) in warp order, and the last writes partial[b]:
// partial[b][c] = ((s_0 + s_1) + ...) + s_7 of the warps' dweight sums,
// partial[b][C + c] likewise of dbias.
template <typename T, bool kVec, bool kAccumulate, int kLaneChunks>
__global__ void __launch_bounds__(kRowThreads)
    layernorm_backward_fused_kernel(T* dinp, float* partial, const T* dout, const T* inp,
                                    const T* weight, const float* mean, const float* rstd, int N,
                                    int C, int rows_per_chunk) {
  SRKIT_DYNAMIC_SHARED(float, block_sums);
  const int chunks = (C + kChunk - 1) / kChunk;
  const int r0 = int(blockIdx.x) * rows_per_chunk;
  const int r1 = N - r0 < rows_per_chunk ? N : r0 + rows_per_chunk;
  LaneParamSums<kLaneChunks> sums;
  // Every warp runs every group's shuffles (warp.cuh); one past the chunk's
  // last row runs them on no data.
  for (int base = r0; base < r1; base += kRowWarps) {
    const int row = base + warp_id();
    const bool valid = row < r1;
    const size_t off = valid ? size_t(row) * size_t(C) : 0;
    layernorm_dinp_row<T, kVec, kAccumulate, kLaneChunks>(
        dinp + off, dout + off, inp + off, weight, valid ? mean[row] : 0.0f,
        valid ? rstd[row] : 0.0f, C, valid ? chunks : 0, sums);
  }
  float* out = partial + size_t(blockIdx.x) * 2 * size_t(C);
  for (int w = 0; w < kRowWarps; ++w) {
    if (warp_id() == w) {
      float* dst = w == kRowWarps - 1 ? out : block_sums;
      for_lane_chunks<kLaneChunks>(lane_id(), chunks, [&](int ch, int j) {
        const int c0 = ch * kChunk;
        const int n = chunk_len(size_t(C), size_t(c0));
        for (int k = 0; k < kChunk; ++k) {
          if (k >= n) continue;
          const int c = c0 + k;
          dst[c] = w == 0 ? sums.dw[j][k] : block_sums[c] + sums.dw[j][k];
          dst[C + c] = w == 0 ? sums.db[j][k] : block_sums[C + c] + sums.db[j][k];
        }
      });
    }
    __syncthreads();
  }
}

// partial[chunk][c] = sum over the chunk's rows of ((x - mean) * rstd) * dout
// (dweight), partial[chunk][C + c] = sum of dout (dbias), rows in order.
template <typename T>
__global__ void __launch_bounds__(kParamThreads)
    layernorm_param_partials_kernel(float* partial, const T* dout, const T* inp, const float* mean,
                                    const float* rstd, int N, int C, int rows_per_chunk) {
  const int c = int(blockIdx.x) * kParamThreads + int(threadIdx.x);
  if (c >= C) return;  // no barrier or shuffle in this kernel
  const int chunk = int(blockIdx.y);
  const int r0 = chunk * rows_per_chunk;
  const int r1 = N - r0 < rows_per_chunk ? N : r0 + rows_per_chunk;
  float dw = 0.0f, db = 0.0f;
  for (int r = r0; r < r1; ++r) {
    const size_t i = size_t(r) * size_t(C) + size_t(c);
    const float g = load_f32(dout + i);
    dw += layernorm_norm(load_f32(inp + i), mean[r], rstd[r]) * g;
    db += g;
  }
  float* p = partial + size_t(chunk) * 2 * size_t(C);
  p[c] = dw;
  p[C + c] = db;
}

// dweight[c] = RN(base + sum over chunks of partial[chunk][c]); dbias from
// columns C .. 2C - 1 likewise, in sum_chunk_columns' fixed order.
template <typename T>
__global__ void __launch_bounds__(kChunkSumThreads)
    layernorm_param_reduce_kernel(T* dweight, T* dbias, const float* partial, int chunks, int C,
                                  bool accumulate) {
  sum_chunk_columns(partial, chunks, 2 * C, [&](int j, float total) {
    T* dst = j < C ? dweight + j : dbias + (j - C);
    store_f32(dst, grad_base(*dst, accumulate) + total);
  });
}

// The fused path keeps 2 * 8 sums a lane chunk in registers: up to 4 lane
// chunks, C <= 1024 (GPT-2 124M and 350M; wider rows take the unfused path).
constexpr int kFusedMaxLaneChunks = 4;

template <typename T, bool kVec, bool kAccumulate>
auto fused_kernel_for(int lane_chunks) {
  switch (lane_chunks) {
    case 1:
      return layernorm_backward_fused_kernel<T, kVec, kAccumulate, 1>;
    case 2:
      return layernorm_backward_fused_kernel<T, kVec, kAccumulate, 2>;
    case 3:
      return layernorm_backward_fused_kernel<T, kVec, kAccumulate, 3>;
    default:
      return layernorm_backward_fused_kernel<T, kVec, kAccumulate, 4>;
  }
}

template <typename T>
auto fused_kernel(bool vec, bool accumulate, int lane_chunks) {
  if (vec) {
    return accumulate ? fused_kernel_for<T, true, true>(lane_chunks)
                      : fused_kernel_for<T, true, false>(lane_chunks);
  }
  return accumulate ? fused_kernel_for<T, false, true>(lane_chunks)
                    : fused_kernel_for<T, false, false>(lane_chunks);
}

}  // namespace

void layernorm_forward(DType dt, void* out, float* mean, float* rstd, const void* inp,
                       const void* weight, const void* bias, int N, int C, Stream stream) {
  check_shape(N > 0 && C > 0, "layernorm_forward",
              "N=" + std::to_string(N) + " C=" + std::to_string(C), "both > 0");
  const bool vec =
      C % kChunk == 0 && aligned16(out) && aligned16(inp) && aligned16(weight) && aligned16(bias);
  with_dtype(dt, [&](auto tag) {
    using S = decltype(tag);
    auto* o = static_cast<S*>(out);
    const auto* x = static_cast<const S*>(inp);
    const auto* w = static_cast<const S*>(weight);
    const auto* b = static_cast<const S*>(bias);
    const bool held = lane_chunks_of(C) <= kHeldLaneChunks;
    auto kernel = vec ? (held ? layernorm_forward_kernel<S, true, kHeldLaneChunks>
                              : layernorm_forward_kernel<S, true, 0>)
                      : (held ? layernorm_forward_kernel<S, false, kHeldLaneChunks>
                              : layernorm_forward_kernel<S, false, 0>);
    launch(kernel, row_blocks(N), kRowThreads, 0, stream, "layernorm_forward", o, mean, rstd, x, w,
           b, N, C);
  });
}

void residual_layernorm_forward(DType dt, void* residual, void* ln, float* mean, float* rstd,
                                const void* a, const void* b, const void* weight, const void* bias,
                                int N, int C, Stream stream) {
  check_shape(N > 0 && C > 0, "residual_layernorm_forward",
              "N=" + std::to_string(N) + " C=" + std::to_string(C), "both > 0");
  const bool vec = C % kChunk == 0 && aligned16(residual) && aligned16(ln) && aligned16(a) &&
                   aligned16(b) && aligned16(weight) && aligned16(bias);
  with_dtype(dt, [&](auto tag) {
    using S = decltype(tag);
    auto* r = static_cast<S*>(residual);
    auto* o = static_cast<S*>(ln);
    const auto* pa = static_cast<const S*>(a);
    const auto* pb = static_cast<const S*>(b);
    const auto* w = static_cast<const S*>(weight);
    const auto* bi = static_cast<const S*>(bias);
    const bool held = lane_chunks_of(C) <= kHeldLaneChunks;
    auto kernel = vec ? (held ? residual_layernorm_kernel<S, true, kHeldLaneChunks>
                              : residual_layernorm_kernel<S, true, 0>)
                      : (held ? residual_layernorm_kernel<S, false, kHeldLaneChunks>
                              : residual_layernorm_kernel<S, false, 0>);
    launch(kernel, row_blocks(N), kRowThreads, 0, stream, "residual_layernorm_forward", r, o, mean,
           rstd, pa, pb, w, bi, N, C);
  });
}

void layernorm_backward(DType dt, DType grad_dt, void* dinp, GradWrite dinp_mode, void* dweight,
                        void* dbias, GradWrite param_mode, const void* dout, const void* inp,
                        const void* weight, const float* mean, const float* rstd, int N, int C,
                        void* scratch, Stream stream) {
  check_shape(N > 0 && C > 0, "layernorm_backward",
              "N=" + std::to_string(N) + " C=" + std::to_string(C), "both > 0");
  const bool vec =
      C % kChunk == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) && aligned16(weight);
  const bool acc_dinp = dinp_mode == GradWrite::kAccumulate;
  const LayernormPartition part = layernorm_partition(N);
  auto* partial = static_cast<float*>(scratch);
  const int lane_chunks = lane_chunks_of(C);
  with_dtype(dt, [&](auto tag) {
    using S = decltype(tag);
    auto* dx = static_cast<S*>(dinp);
    const auto* g = static_cast<const S*>(dout);
    const auto* x = static_cast<const S*>(inp);
    const auto* w = static_cast<const S*>(weight);
    if (lane_chunks <= kFusedMaxLaneChunks) {
      const size_t shared = 2 * size_t(C) * sizeof(float);
      launch(fused_kernel<S>(vec, acc_dinp, lane_chunks), unsigned(part.chunks), kRowThreads,
             shared, stream, "layernorm_backward (fused)", dx, partial, g, x, w, mean, rstd, N, C,
             part.rows_per_chunk);
      return;
    }
    auto dinp_kernel = vec ? (acc_dinp ? layernorm_backward_dinp_kernel<S, true, true>
                                       : layernorm_backward_dinp_kernel<S, true, false>)
                           : (acc_dinp ? layernorm_backward_dinp_kernel<S, false, true>
                                       : layernorm_backward_dinp_kernel<S, false, false>);
    launch(dinp_kernel, row_blocks(N), kRowThreads, 0, stream, "layernorm_backward (dinp)", dx, g,
           x, w, mean, rstd, N, C);
    const dim3 grid(unsigned((C + kParamThreads - 1) / kParamThreads), unsigned(part.chunks));
    launch(layernorm_param_partials_kernel<S>, grid, kParamThreads, 0, stream,
           "layernorm_backward (parameter partials)", partial, g, x, mean, rstd, N, C,
           part.rows_per_chunk);
  });
  with_dtype(grad_dt, [&](auto tag) {
    using G = decltype(tag);
    launch(layernorm_param_reduce_kernel<G>, chunk_sum_blocks(2 * C), kChunkSumThreads, 0, stream,
           "layernorm_backward (parameter sums)", static_cast<G*>(dweight), static_cast<G*>(dbias),
           partial, part.chunks, C, param_mode == GradWrite::kAccumulate);
  });
}

}  // namespace srkit::cuda
