// Softmax cross-entropy, the fused classifier and the loss mean
// (kernels/cuda/loss.h), with the CPU op's element expressions
// (kernels/cpu/loss.cpp): max subtracted, exp_poly, loss = log(sum) -
// (l[target] - max), dlogits = exp_poly(l - max) * (1 / sum) * dloss and
// (p - 1) * dloss at the target.
//
// Shape: one block per row (rows are up to V = 50304 wide and N = B*T rows
// give thousands of blocks). Thread t owns the 8-column chunks t, t + threads,
// ... of the row and reduces them in column order; block_max and block_sum
// (kernels/cuda/warp.cuh) combine the threads in a fixed order. The threads of
// a block are enough for the row's chunks, up to 1024 (so 50304 columns are ~6
// chunks a thread, each one 128-bit load of bf16), and depend on V alone: the
// forward, the backward and the classifier share row_stats with the same block
// for the same V, which makes the classifier equal to forward then backward
// bit for bit. The row is read once for the maximum, once for the sum, and
// (backward) once more for the gradient: the rereads come from L2.
//
// Staged backward and classifier: the gradient needs exp_poly(l - max) of
// every column, which the sum has already computed, and at GPT-2's shapes
// that arithmetic, not memory, bounds the kernel (two exp_poly a column, ~60
// instructions; fp32 and bf16 took the same time on an H200, BENCHMARKS.md).
// So when the row's Vp floats fit a block's shared memory (201 KiB at Vp =
// 50304: sm_90 opts into 227 KiB; sm_80's 163 KiB does not fit and keeps the
// path above) and the row is vectorizable, each thread copies its chunks into
// shared memory as it takes the maximum, overwrites them with their exp terms
// as it sums, and multiplies the terms in the gradient pass: one read of the
// row from global memory and one exp_poly a column. The chunks, the threads
// and the order of every operation are those of row_stats and row_gradient
// (and builds never contract a * b + c: --fmad=false), so the bits are the
// same on either path.
//
// Targets: < 0 ignores the row; >= V is the caller's error (the CPU throws),
// treated here as ignored so that no read leaves the row.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/common/softmax.h"
#include "kernels/cuda/elements.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/warp.cuh"

namespace srkit::cuda {
namespace {

constexpr int kMaxThreads = 1024;
constexpr unsigned kMaxRowBlocks = 65535;

int row_threads(int V) {
  const int chunks = (V + kChunk - 1) / kChunk;
  const int warps = (chunks + kWarpSize - 1) / kWarpSize;
  return std::min(kMaxThreads, std::max(1, warps) * kWarpSize);
}

unsigned row_blocks(int N) { return unsigned(std::min<long long>(N, kMaxRowBlocks)); }

struct RowStats {
  float max, sum;
};

// The maximum of l[0, V) and the sum of exp_poly(l[v] - max), in the order
// the header describes. Contains block barriers: every thread calls it.
template <typename T, bool kVec>
__device__ RowStats row_stats(const T* l, int V) {
  const int chunks = (V + kChunk - 1) / kChunk;
  float x[kChunk];
  float mx = -INFINITY;
  for (int ch = int(threadIdx.x); ch < chunks; ch += int(blockDim.x)) {
    const int n = chunk_len(size_t(V), size_t(ch) * kChunk);
    // Vector loads may take padding columns past V (never past Vp); they are not used.
    if (kVec) {
      load8_aligned(l + ch * kChunk, x);
    } else {
      load_chunk<false>(l + ch * kChunk, n, x);
    }
    for (int k = 0; k < n; ++k) mx = mx < x[k] ? x[k] : mx;
  }
  mx = block_max(mx, -INFINITY);
  float sum = 0.0f;
  for (int ch = int(threadIdx.x); ch < chunks; ch += int(blockDim.x)) {
    const int n = chunk_len(size_t(V), size_t(ch) * kChunk);
    if (kVec) {
      load8_aligned(l + ch * kChunk, x);
    } else {
      load_chunk<false>(l + ch * kChunk, n, x);
    }
    for (int k = 0; k < n; ++k) sum += softmax_term(x[k], mx);
  }
  sum = block_sum(sum);
  return {mx, sum};
}

// -log softmax[target] = log(sum) - (l[target] - max).
__device__ __forceinline__ float row_loss(const RowStats& st, float l_target) {
  return crossentropy_loss(st.sum, l_target, st.max);
}

// Zeros over d[0, Vp): an ignored row.
template <typename T, bool kVec>
__device__ void row_zero(T* d, int Vp) {
  const int chunks = (Vp + kChunk - 1) / kChunk;
  const float z[kChunk] = {};
  for (int ch = int(threadIdx.x); ch < chunks; ch += int(blockDim.x)) {
    const int c0 = ch * kChunk;
    store_chunk<kVec>(d + c0, chunk_len(size_t(Vp), size_t(c0)), z);
  }
}

// Each block takes rows blockIdx.x, + gridDim.x, ...: the branch on a row's
// target is the same for every thread of the block, so the barriers inside
// row_stats are reached by all of them or by none.
// __launch_bounds__: a row may take 1024 threads, so at most 64 registers each.
template <typename T, bool kVec>
__global__ void __launch_bounds__(kMaxThreads)
    crossentropy_forward_kernel(float* losses, const T* logits, const int32_t* targets, int N,
                                int V, int Vp) {
  for (int row = int(blockIdx.x); row < N; row += int(gridDim.x)) {
    const int target = targets[row];
    if (target < 0 || target >= V) {
      if (threadIdx.x == 0) losses[row] = 0.0f;
      continue;
    }
    const T* l = logits + size_t(row) * size_t(Vp);
    const float l_target = load_f32(l + target);
    const RowStats st = row_stats<T, kVec>(l, V);
    if (threadIdx.x == 0) losses[row] = row_loss(st, l_target);
  }
}

// ---- staged rows (header) ---------------------------------------------------------
// Shared memory holds a row as two planes of 16-byte quarters: elements
// [4h, 4h + 4) of chunk ch at quarter h * chunks + ch, so that the lanes of a
// warp touch consecutive 16 bytes (no bank conflicts). A thread reads and
// writes only the quarters of its own chunks, so the stage itself needs no
// barrier (the block reductions have theirs), not even between rows.
struct alignas(16) Quarter {
  float v[4];
};

__device__ __forceinline__ void stage_chunk(Quarter* stage, int chunks, int ch,
                                            const float (&x)[kChunk]) {
  for (int h = 0; h < 2; ++h) {
    Quarter q;
    for (int k = 0; k < 4; ++k) q.v[k] = x[4 * h + k];
    stage[h * chunks + ch] = q;
  }
}

__device__ __forceinline__ void unstage_chunk(const Quarter* stage, int chunks, int ch,
                                              float (&x)[kChunk]) {
  for (int h = 0; h < 2; ++h) {
    const Quarter q = stage[h * chunks + ch];
    for (int k = 0; k < 4; ++k) x[4 * h + k] = q.v[k];
  }
}

size_t staged_row_bytes(int Vp) { return size_t(Vp) * sizeof(float); }

// row_stats for a vectorizable row, leaving each of the thread's chunks in
// `stage`: its exp terms softmax_term(l - max) on columns below V (the rest as
// read, never used).
template <typename T>
__device__ RowStats staged_row_stats(Quarter* stage, const T* l, int V, int Vp) {
  const int chunks = (V + kChunk - 1) / kChunk;
  const int padded_chunks = Vp / kChunk;
  float x[kChunk];
  float mx = -INFINITY;
  for (int ch = int(threadIdx.x); ch < padded_chunks; ch += int(blockDim.x)) {
    load8_aligned(l + ch * kChunk, x);
    stage_chunk(stage, padded_chunks, ch, x);
    if (ch >= chunks) continue;
    const int n = chunk_len(size_t(V), size_t(ch) * kChunk);
    for (int k = 0; k < n; ++k) mx = mx < x[k] ? x[k] : mx;
  }
  mx = block_max(mx, -INFINITY);
  float sum = 0.0f;
  for (int ch = int(threadIdx.x); ch < chunks; ch += int(blockDim.x)) {
    const int n = chunk_len(size_t(V), size_t(ch) * kChunk);
    unstage_chunk(stage, padded_chunks, ch, x);
    for (int k = 0; k < n; ++k) {
      x[k] = softmax_term(x[k], mx);
      sum += x[k];
    }
    stage_chunk(stage, padded_chunks, ch, x);
  }
  sum = block_sum(sum);
  return {mx, sum};
}

// ---- one row of the backward, from either source ------------------------------------
// Where the passes over a row read it: the logits in global memory each time
// (GlobalRow: x is l), or the stage staged_row_stats left (StagedRow: x is
// softmax_term(l, max)). Both take the kernel's stage; GlobalRow ignores it.
template <typename T, bool kVec>
struct GlobalRow {
  static constexpr bool kTerms = false;
  static constexpr bool kVecStore = kVec;
  const T* l;
  __device__ GlobalRow(Quarter*, const T* row) : l(row) {}
  __device__ RowStats stats(int V, int) const { return row_stats<T, kVec>(l, V); }
  __device__ void chunk(int ch, int n, int, float (&x)[kChunk]) const {
    load_chunk<kVec>(l + ch * kChunk, n, x);
  }
};

template <typename T>
struct StagedRow {
  static constexpr bool kTerms = true;
  static constexpr bool kVecStore = true;
  Quarter* stage;
  const T* l;
  __device__ StagedRow(Quarter* shared, const T* row) : stage(shared), l(row) {}
  __device__ RowStats stats(int V, int Vp) const { return staged_row_stats<T>(stage, l, V, Vp); }
  __device__ void chunk(int ch, int, int Vp, float (&x)[kChunk]) const {
    unstage_chunk(stage, Vp / kChunk, ch, x);
  }
};

// d[0, Vp) of a row whose target is valid: (softmax - onehot) * dloss on
// [0, V), zeros on the padding; softmax_prob(l, max, inv) is
// softmax_term(l, max) * inv, so a staged term gives the same bits. l_target
// was read before any thread of the block could write (d may alias l: each
// element is read, then written, by the thread that owns it).
template <typename T, typename Row>
__device__ void row_gradient(T* d, const Row& row, const RowStats& st, int target, float l_target,
                             float dloss, int V, int Vp) {
  const float inv = 1.0f / st.sum;
  const int chunks = (Vp + kChunk - 1) / kChunk;
  for (int ch = int(threadIdx.x); ch < chunks; ch += int(blockDim.x)) {
    const int c0 = ch * kChunk;
    const int n = chunk_len(size_t(Vp), size_t(c0));
    float x[kChunk];
    row.chunk(ch, n, Vp, x);
    for (int k = 0; k < kChunk; ++k) {
      const int v = c0 + k;
      if (v >= V) {
        x[k] = 0.0f;
      } else if (v == target) {
        x[k] = (softmax_prob(l_target, st.max, inv) - 1.0f) * dloss;
      } else {
        x[k] = (Row::kTerms ? x[k] * inv : softmax_prob(x[k], st.max, inv)) * dloss;
      }
    }
    store_chunk<Row::kVecStore>(d + c0, n, x);
  }
}

// The backward (kLoss false) and the classifier (kLoss true: the loss as the
// forward computes it, then the gradient over the logits in place). kStaged
// (kVec rows only): dynamic shared memory of staged_row_bytes(Vp) holds the
// row between passes; otherwise the kernel takes no dynamic shared memory and
// `stage` goes unused.
template <typename T, bool kVec, bool kStaged, bool kLoss>
__global__ void __launch_bounds__(kMaxThreads)
    crossentropy_backward_kernel(T* dlogits, float* losses, const T* logits, const int32_t* targets,
                                 float dloss, int N, int V, int Vp) {
  static_assert(kVec || !kStaged, "the staged path needs whole, aligned chunks");
  SRKIT_DYNAMIC_SHARED(Quarter, stage);
  for (int row = int(blockIdx.x); row < N; row += int(gridDim.x)) {
    const int target = targets[row];
    T* d = dlogits + size_t(row) * size_t(Vp);
    if (target < 0 || target >= V) {
      if (kLoss && threadIdx.x == 0) losses[row] = 0.0f;
      row_zero<T, kVec>(d, Vp);
      continue;
    }
    const T* l = logits + size_t(row) * size_t(Vp);
    const float l_target = load_f32(l + target);  // before any barrier: d may alias l
    using Row = std::conditional_t<kStaged, StagedRow<T>, GlobalRow<T, kVec>>;
    const Row src(stage, l);
    const RowStats st = src.stats(V, Vp);
    if (kLoss && threadIdx.x == 0) losses[row] = row_loss(st, l_target);
    row_gradient<T>(d, src, st, target, l_target, dloss, V, Vp);
  }
}

// One block: thread t adds rows t, t + threads, ... in fp64, block_sum adds
// the threads in a fixed order.
constexpr int kMeanThreads = 256;
__global__ void __launch_bounds__(kMeanThreads)
    mean_loss_kernel(const float* losses, const int32_t* targets, int N, int count, double* out) {
  double sum = 0.0;
  for (int i = int(threadIdx.x); i < N; i += kMeanThreads) {
    sum += targets[i] >= 0 ? double(losses[i]) : 0.0;
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) *out = count > 0 ? sum / double(count) : 0.0;
}

void check_ce_shape(const char* op, int N, int V, int Vp) {
  check_shape(N > 0 && V > 0 && Vp >= V, op,
              "N=" + std::to_string(N) + " V=" + std::to_string(V) + " Vp=" + std::to_string(Vp),
              "N > 0 and 0 < V <= Vp");
}

// The vector path needs every row 16-byte aligned and whole chunks inside
// the row: Vp a multiple of 8 and aligned bases.
bool rows_vectorizable(int Vp, const void* a, const void* b) {
  return Vp % kChunk == 0 && aligned16(a) && aligned16(b);
}

template <bool kLoss>
void backward_like(const char* name, DType dt, void* dlogits, float* losses, const void* logits,
                   const int32_t* targets, float dloss, int N, int V, int Vp, Stream stream) {
  check_ce_shape(name, N, V, Vp);
  const bool vec = rows_vectorizable(Vp, logits, dlogits);
  const bool staged = vec && crossentropy_stages_rows(Vp);
  const size_t shared = staged ? staged_row_bytes(Vp) : 0;
  with_dtype(dt, [&](auto tag) {
    using S = decltype(tag);
    auto kernel = staged ? crossentropy_backward_kernel<S, true, true, kLoss>
                  : vec  ? crossentropy_backward_kernel<S, true, false, kLoss>
                         : crossentropy_backward_kernel<S, false, false, kLoss>;
    if (shared > kDefaultSharedBytes) opt_in_shared(kernel, shared, name);
    launch(kernel, row_blocks(N), row_threads(V), shared, stream, name, static_cast<S*>(dlogits),
           losses, static_cast<const S*>(logits), targets, dloss, N, V, Vp);
  });
}

}  // namespace

bool crossentropy_stages_rows(int Vp) {
  // The limit counts static shared memory too: block_max and block_sum take
  // 256 bytes on sm_90; 1 KiB leaves them room.
  constexpr size_t kStaticSharedBytes = 1024;
  return Vp > 0 && Vp % kChunk == 0 &&
         staged_row_bytes(Vp) + kStaticSharedBytes <= opt_in_shared_limit();
}

void crossentropy_forward(DType dt, float* losses, const void* logits, const int32_t* targets,
                          int N, int V, int Vp, Stream stream) {
  check_ce_shape("crossentropy_forward", N, V, Vp);
  const bool vec = rows_vectorizable(Vp, logits, logits);
  with_dtype(dt, [&](auto tag) {
    using S = decltype(tag);
    auto kernel =
        vec ? crossentropy_forward_kernel<S, true> : crossentropy_forward_kernel<S, false>;
    launch(kernel, row_blocks(N), row_threads(V), 0, stream, "crossentropy_forward", losses,
           static_cast<const S*>(logits), targets, N, V, Vp);
  });
}

void crossentropy_backward(DType dt, void* dlogits, const void* logits, const int32_t* targets,
                           float dloss, int N, int V, int Vp, Stream stream) {
  backward_like<false>("crossentropy_backward", dt, dlogits, nullptr, logits, targets, dloss, N, V,
                       Vp, stream);
}

void classifier(DType dt, void* logits, float* losses, const int32_t* targets, float dloss, int N,
                int V, int Vp, Stream stream) {
  backward_like<true>("classifier", dt, logits, losses, logits, targets, dloss, N, V, Vp, stream);
}

void mean_loss(const float* losses, const int32_t* targets, int N, int count, double* out,
               Stream stream) {
  launch(mean_loss_kernel, 1, kMeanThreads, 0, stream, "mean_loss", losses, targets, std::max(N, 0),
         count, out);
}

}  // namespace srkit::cuda
