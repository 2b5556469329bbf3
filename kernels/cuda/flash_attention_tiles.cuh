// The pieces the flash attention kernels (flash_attention.cu,
// flash_attention_backward.cu) share: tile shapes, shared-memory tiles, the
// copy of a head's rows into a tile, the two warp-level products every pass is
// made of, and the row-wise store of an accumulator. Internal to those files.
//
// A block is kWarps warps; warp w owns the 16 rows 16w..16w+15 of the block's
// kRows rows (queries in forward and dQ, keys in dK/dV) and holds them as
// fragments in registers; the other operand streams through shared memory in
// tiles of kTile<kHs> rows. Every function here that touches a fragment is
// full-warp (warp.cuh's rules): all lanes call it, the same number of times.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/common/bf16.h"
#include "kernels/common/dtype.h"
#include "kernels/cuda/compat.cuh"
#include "kernels/cuda/elements.cuh"
#include "kernels/cuda/mma_fragment.cuh"
#include "kernels/cuda/warp.cuh"

namespace srkit::cuda::flash {

inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarpSize * kWarps;
inline constexpr int kRows = 16 * kWarps;  // the rows a block owns

// Rows of a streamed tile: 64 for hs = 64; 32 for hs = 128, so that forward's
// three tiles (and backward's) stay under the 48 KiB of static shared memory.
template <int kHs>
inline constexpr int kTile = kHs == 64 ? 64 : 32;

// Row stride of a shared tile in elements: 16-byte rows for ldmatrix, and the
// 8-element pad shifts consecutive rows by 16 bytes, so the 8 rows one
// ldmatrix phase reads fall in different banks.
template <int kHs>
inline constexpr int kLd = kHs + 8;

template <int kRowsOf, int kHs>
struct alignas(16) Tile {
  uint16_t v[kRowsOf * kLd<kHs>];
};

__device__ __forceinline__ float neg_inf() { return bits_as_float(0xff800000u); }
__device__ __forceinline__ float max_of(float a, float b) { return a < b ? b : a; }

// tile[r][0..kHs) = rows[row0 + r][0..kHs) for r < kRowsOf, zero past row T;
// `rows` points at the head's first channel of row 0, rows `stride` elements
// apart (16-byte aligned: the launchers check). The whole block copies,
// consecutive threads on consecutive 16-byte chunks of a row (coalesced).
template <int kRowsOf, int kHs>
__device__ __forceinline__ void load_tile(uint16_t* tile, const uint16_t* rows, size_t stride,
                                          int row0, int T) {
  constexpr int kChunks = kHs / 8;  // 16-byte chunks per row
  for (int i = int(threadIdx.x); i < kRowsOf * kChunks; i += int(blockDim.x)) {
    const int r = i / kChunks, c = i % kChunks;
    Raw16 v{};
    if (row0 + r < T) v = load16(rows + size_t(row0 + r) * stride + 8 * c);
    store16(tile + r * kLd<kHs> + 8 * c, v);
  }
}

// The A fragments of rows 0..15 of `tile` (a warp's 16 rows), all kHs columns.
template <int kHs>
__device__ __forceinline__ void load_rows(mma::FragA (&a)[kHs / 16], const uint16_t* tile) {
  for (int kk = 0; kk < kHs / 16; ++kk) mma::load_a(a[kk], tile + 16 * kk, kLd<kHs>);
}

// s (16 x kN) = a (16 x kHs) times tile^T, tile [kN][kHs]: the dot product of
// each of the warp's rows with each row of the tile (scores, dP), fp32, over
// the head dimension in increasing order of 16-wide steps.
template <int kN, int kHs>
__device__ __forceinline__ void dot_rows(mma::FragC (&s)[kN / 8], const mma::FragA (&a)[kHs / 16],
                                         const uint16_t* tile) {
  for (int n = 0; n < kN / 8; ++n) {
    mma::zero(s[n]);
    for (int kk = 0; kk < kHs / 16; ++kk) {
      mma::FragB b;
      mma::load_b(b, tile + 8 * n * kLd<kHs> + 16 * kk, kLd<kHs>);
      mma::mma(s[n], a[kk], b, s[n]);
    }
  }
}

// acc (16 x kHs) += p (16 x kN, rounded to bf16) times tile [kN][kHs] (P V,
// dS K, and their transposed forms), over the tile's rows in increasing order.
template <int kN, int kHs>
__device__ __forceinline__ void add_product(mma::FragC (&acc)[kHs / 8],
                                            const mma::FragC (&p)[kN / 8], const uint16_t* tile) {
  for (int kk = 0; kk < kN / 16; ++kk) {
    const mma::FragA pa = mma::a_from_c(p[2 * kk], p[2 * kk + 1]);
    for (int j = 0; j < kHs / 8; ++j) {
      mma::FragB b;
      mma::load_b_trans(b, tile + 16 * kk * kLd<kHs> + 8 * j, kLd<kHs>);
      mma::mma(acc[j], pa, b, acc[j]);
    }
  }
}

// The warp's row of fragment element e (0..15) and its column within an
// 8-wide n-tile: the C layout of mma_fragment.cuh. Elements 0, 1 are row g and
// 2, 3 row g + 8: half = e / 2 indexes per-row values.
__device__ __forceinline__ int frag_row(int e) { return mma::c_row(lane_id(), e); }
__device__ __forceinline__ int frag_col(int e) { return mma::c_col(lane_id(), e); }

// The sum (or max) of a per-row value over the 4 lanes sharing that row
// (lanes 4g .. 4g + 3): the same bits on all four (warp.cuh's butterfly).
__device__ __forceinline__ float quad_sum(float v) {
  v += warp_shfl_xor(v, 1);
  return v + warp_shfl_xor(v, 2);
}
__device__ __forceinline__ float quad_max(float v) {
  v = max_of(v, warp_shfl_xor(v, 1));
  return max_of(v, warp_shfl_xor(v, 2));
}

// Two adjacent bf16 at p (4-byte aligned) as one 32-bit word, low half first.
__device__ __forceinline__ uint32_t load_pair(const uint16_t* p) {
#if defined(SRKIT_CUDA_EMU)
  uint32_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
#else
  return *reinterpret_cast<const uint32_t*>(p);
#endif
}
__device__ __forceinline__ void store_pair(uint16_t* p, uint32_t w) {
#if defined(SRKIT_CUDA_EMU)
  std::memcpy(p, &w, sizeof w);
#else
  *reinterpret_cast<uint32_t*>(p) = w;
#endif
}

// dst[row0 + r][c] = RN(base + factor[r's half] * acc) for the warp's rows
// below T, base the stored value (accumulate) or 0 (GradWrite): one rounding.
// dst points at the head's first channel of row 0, rows `stride` elements
// apart. Each lane stores its two adjacent columns as one 32-bit word, and
// reads them first only when accumulating.
template <int kHs>
__device__ __forceinline__ void store_rows(uint16_t* dst, size_t stride, int row0, int T,
                                           const mma::FragC (&acc)[kHs / 8],
                                           const float (&factor)[2], bool accumulate) {
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + frag_row(2 * half);
    if (row >= T) continue;
    for (int j = 0; j < kHs / 8; ++j) {
      uint16_t* p = dst + size_t(row) * stride + 8 * j + frag_col(2 * half);
      const uint32_t old = accumulate ? load_pair(p) : 0u;  // 0u: two bf16 zeros
      const float lo =
          bf16_to_float(bf16{mma::half_of(old, 0)}) + factor[half] * acc[j].x[2 * half];
      const float hi =
          bf16_to_float(bf16{mma::half_of(old, 1)}) + factor[half] * acc[j].x[2 * half + 1];
      store_pair(p, mma::pack2(float_to_bf16_rn(lo).bits, float_to_bf16_rn(hi).bits));
    }
  }
}

// The launchers' argument checks (flash_attention.h's contract); `tensors`
// are the bf16 ones, read and written 16 bytes at a time.
inline void check_args(const char* op, DType dt, int B, int T, int C, int NH,
                       const void* const* tensors, int count) {
  if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH != 0)
    throw std::invalid_argument(std::string(op) + ": bad shape B=" + std::to_string(B) +
                                " T=" + std::to_string(T) + " C=" + std::to_string(C) + " NH=" +
                                std::to_string(NH) + " (expected all > 0 and C divisible by NH)");
  if (dt != DType::kBF16 || (C / NH != 64 && C / NH != 128))
    throw std::invalid_argument(std::string(op) + ": needs bf16 and head size 64 or 128, got " +
                                dtype_name(dt) + " and head size " + std::to_string(C / NH));
  if (size_t(B) * size_t(NH) > 0x7fffffffu || (T + kRows - 1) / kRows > 65535)
    throw std::invalid_argument(std::string(op) + ": grid too large for B*NH=" +
                                std::to_string(size_t(B) * size_t(NH)) + " T=" + std::to_string(T));
  for (int i = 0; i < count; ++i)
    if (reinterpret_cast<uintptr_t>(tensors[i]) % 16 != 0)
      throw std::invalid_argument(std::string(op) + ": bf16 tensors must be 16-byte aligned");
}

}  // namespace srkit::cuda::flash
