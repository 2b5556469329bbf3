// A tiled GEMM through the warp-level fragments of kernels/cuda/mma_fragment.cuh,
// shared by their test (tests/gpu/test_mma_fragment_gpu.cu) and the planted
// defects of the emulation self-test (tests/emu/test_emu_selftest.cu).
//
// C[M][N] = A[M][K] B[K][N], all row-major fp32 in global memory holding bf16
// values; M, N, K multiples of 16, 8 * kWarps and 16. A block of kWarps warps
// computes rows 16 * blockIdx.y.. and columns 8 * kWarps * blockIdx.x..; for
// each k step of 16 it copies the A and B tiles to shared memory, A as stored
// row-major (kATrans false) or transposed, B as [n][k] (kBTrans false) or
// [k][n], so that every load of the header is exercised.
#pragma once

#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/cuda/compat.cuh"
#include "kernels/cuda/mma_fragment.cuh"

namespace srkit::test {

inline constexpr int kMmaWarps = 2;
inline constexpr int kMmaLd = 16 + 8;              // A tile row stride (16-byte rows)
inline constexpr int kMmaBLd = 8 * kMmaWarps + 8;  // B tile [k][n] row stride
static_assert(16 * kMmaBLd >= 8 * kMmaWarps * kMmaLd, "one B tile holds both arrangements");

// Shared tiles with 16-byte aligned rows (ldmatrix reads 16-byte rows).
template <int kElements>
struct alignas(16) Tile {
  uint16_t v[kElements];
};

// Planted defects (the self-test): kSync false drops the barriers between the
// tile copies and the fragment loads; kSwapA puts the A elements of rows
// g + 8 into the registers of columns 8.. (a wrong lane-to-element mapping).
template <bool kATrans, bool kBTrans, bool kSync = true, bool kSwapA = false>
__global__ void mma_gemm(const float* a, const float* b, float* c, int n, int k) {
  __shared__ Tile<16 * kMmaLd> sa_tile;
  uint16_t* const sa = sa_tile.v;
  __shared__ Tile<16 * kMmaBLd> sb_tile;  // 16 * kMmaBLd = 8 * kMmaWarps * kMmaLd here
  uint16_t* const sb = sb_tile.v;
  const int tid = int(threadIdx.x), warp = tid / 32;
  const int row0 = 16 * int(blockIdx.y), col0 = 8 * kMmaWarps * int(blockIdx.x);
  cuda::mma::FragC acc;
  cuda::mma::zero(acc);
  for (int k0 = 0; k0 < k; k0 += 16) {
    for (int i = tid; i < 16 * 16; i += 32 * kMmaWarps) {
      const int r = i / 16, kk = i % 16;
      const uint16_t v = float_to_bf16_rn(a[size_t(row0 + r) * k + k0 + kk]).bits;
      sa[kATrans ? kk * kMmaLd + r : r * kMmaLd + kk] = v;
    }
    for (int i = tid; i < 16 * 8 * kMmaWarps; i += 32 * kMmaWarps) {
      const int kk = i / (8 * kMmaWarps), nn = i % (8 * kMmaWarps);
      const uint16_t v = float_to_bf16_rn(b[size_t(k0 + kk) * n + col0 + nn]).bits;
      sb[kBTrans ? kk * kMmaBLd + nn : nn * kMmaLd + kk] = v;
    }
    if (kSync) __syncthreads();
    cuda::mma::FragA fa;
    cuda::mma::FragB fb;
    if (kATrans)
      cuda::mma::load_a_trans(fa, sa, kMmaLd);
    else
      cuda::mma::load_a(fa, sa, kMmaLd);
    if (kSwapA) {
      const uint32_t t = fa.r[1];
      fa.r[1] = fa.r[2];
      fa.r[2] = t;
    }
    if (kBTrans)
      cuda::mma::load_b_trans(fb, sb + 8 * warp, kMmaBLd);
    else
      cuda::mma::load_b(fb, sb + 8 * warp * kMmaLd, kMmaLd);
    cuda::mma::mma(acc, fa, fb, acc);
    if (kSync) __syncthreads();  // the next copy overwrites the tiles
  }
  cuda::mma::store_c(c + size_t(row0) * n + col0 + 8 * warp, n, acc);
}

// The fragment chain of attention: per warp, S = A B (16x16, two n-tiles),
// P = a_from_c(S) (bf16), then C = P B2 (16x8), for one block; A [16][16],
// B [16][16 * kMmaWarps], B2 [16][8 * kMmaWarps], C [16][8 * kMmaWarps].
__global__ void mma_chain(const float* a, const float* b, const float* b2, float* c) {
  __shared__ Tile<16 * kMmaLd> sa_tile;
  uint16_t* const sa = sa_tile.v;
  __shared__ Tile<16 * kMmaWarps * kMmaLd> sb_tile;
  uint16_t* const sb = sb_tile.v;  // [n][k]
  __shared__ Tile<16 * kMmaBLd> sb2_tile;
  uint16_t* const sb2 = sb2_tile.v;  // [k][n]
  const int tid = int(threadIdx.x), warp = tid / 32;
  for (int i = tid; i < 16 * 16; i += 32 * kMmaWarps)
    sa[i / 16 * kMmaLd + i % 16] = float_to_bf16_rn(a[i]).bits;
  for (int i = tid; i < 16 * 16 * kMmaWarps; i += 32 * kMmaWarps)
    sb[i % (16 * kMmaWarps) * kMmaLd + i / (16 * kMmaWarps)] = float_to_bf16_rn(b[i]).bits;
  for (int i = tid; i < 16 * 8 * kMmaWarps; i += 32 * kMmaWarps)
    sb2[i / (8 * kMmaWarps) * kMmaBLd + i % (8 * kMmaWarps)] = float_to_bf16_rn(b2[i]).bits;
  __syncthreads();
  cuda::mma::FragA fa;
  cuda::mma::load_a(fa, sa, kMmaLd);
  cuda::mma::FragC s[2];
  for (int j = 0; j < 2; ++j) {
    cuda::mma::FragB fb;
    cuda::mma::load_b(fb, sb + (16 * warp + 8 * j) * kMmaLd, kMmaLd);
    cuda::mma::zero(s[j]);
    cuda::mma::mma(s[j], fa, fb, s[j]);
  }
  const cuda::mma::FragA p = cuda::mma::a_from_c(s[0], s[1]);
  cuda::mma::FragB fb2;
  cuda::mma::load_b_trans(fb2, sb2 + 8 * warp, kMmaBLd);
  cuda::mma::FragC out;
  cuda::mma::zero(out);
  cuda::mma::mma(out, p, fb2, out);
  cuda::mma::store_c(c + 8 * warp, 8 * kMmaWarps, out);
}

}  // namespace srkit::test
