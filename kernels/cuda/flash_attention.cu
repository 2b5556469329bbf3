// Fused causal attention forward (kernels/cuda/flash_attention.h): one block
// per (batch and head, tile of kRows queries); warp w holds its 16 queries as
// fragments and streams the key and value tiles of keys 0 .. the block's last
// query through shared memory, keeping an online softmax per row.
#include <cstdint>

#include "kernels/common/math.h"
#include "kernels/common/softmax.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/flash_attention_tiles.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/softmax_fast.cuh"

namespace srkit::cuda {
namespace {

using flash::kLd;
using flash::kRows;
using flash::kThreads;
using flash::kTile;

// grid: x = b * NH + h, y = query tile, the last (most keys) first, so that
// the long blocks start before the short ones. The register caps keep 4
// blocks an SM at head size 64 (128 registers) and 3 at 128, as before the
// approximate tries' branches (ptxas -v: no spills either way).
template <int kHs>
__global__ void __launch_bounds__(kThreads, kHs == 64 ? 4 : 3)
    flash_forward(uint16_t* __restrict__ out, float* __restrict__ lse,
                  const uint16_t* __restrict__ qkv, int T, int NH, float scale) {
  constexpr int kN = kTile<kHs>;
  __shared__ flash::Tile<kRows, kHs> sq;
  __shared__ flash::Tile<kN, kHs> sk, sv;
  const int bh = int(blockIdx.x), b = bh / NH, h = bh % NH;
  const int C = NH * kHs;
  const size_t stride = 3 * size_t(C);
  const int q0 = (int(gridDim.y) - 1 - int(blockIdx.y)) * kRows;
  const int warp = warp_id();
  const uint16_t* q_rows = qkv + size_t(b) * size_t(T) * stride + size_t(h) * kHs;

  flash::load_tile<kRows, kHs>(sq.v, q_rows, stride, q0, T);
  __syncthreads();
  mma::FragA qf[kHs / 16];
  flash::load_rows<kHs>(qf, sq.v + 16 * warp * kLd<kHs>);

  mma::FragC acc[kHs / 8];
  for (mma::FragC& c : acc) mma::zero(c);
  // Per row half (row g and g + 8 of the warp): the running maximum over the
  // tiles so far (the same on the row's 4 lanes) and this lane's part of the
  // running sum (its columns only; the 4 parts are added once at the end).
  float m[2] = {flash::neg_inf(), flash::neg_inf()}, l[2] = {0.0f, 0.0f};
  const int row_first = q0 + 16 * warp;  // the warp's first query
  // Keys past the block's last query are masked for every row: their tiles
  // are never loaded.
  const int key_end = q0 + kRows < T ? q0 + kRows : T;
  for (int k0 = 0; k0 < key_end; k0 += kN) {
    if (k0 > 0) __syncthreads();  // every warp is done with the previous tiles
    flash::load_tile<kN, kHs>(sk.v, q_rows + C, stride, k0, T);
    flash::load_tile<kN, kHs>(sv.v, q_rows + 2 * C, stride, k0, T);
    __syncthreads();
    mma::FragC s[kN / 8];
    flash::dot_rows<kN, kHs>(s, qf, sk.v);
    // Only a tile reaching past the block's first query or past T has masked
    // entries (key > query or key >= T): -inf, and probability exactly 0.
    const bool masked_tile = k0 + kN - 1 > q0 || k0 + kN > T;
    float tile_max[2] = {flash::neg_inf(), flash::neg_inf()};
    for (int n = 0; n < kN / 8; ++n)
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + 8 * n + flash::frag_col(e), query = row_first + flash::frag_row(e);
        float x = s[n].x[e] * scale;
        if (masked_tile && (key > query || key >= T)) x = flash::neg_inf();
        s[n].x[e] = x;
        tile_max[e / 2] = flash::max_of(tile_max[e / 2], x);
      }
    float alpha[2];
    for (int half = 0; half < 2; ++half) {
      // Finite from the first tile on: key 0 is visible to every query (rows
      // past T included, whose q is zero), so no -inf - -inf arises.
      const float m_new = flash::max_of(m[half], flash::quad_max(tile_max[half]));
      alpha[half] = m[half] == flash::neg_inf() ? 0.0f : softmax_term(m[half], m_new);
      m[half] = m_new;
      l[half] *= alpha[half];
    }
    SRKIT_UNROLL
    for (int n = 0; n < kN / 8; ++n) {
      SRKIT_UNROLL
      for (int e = 0; e < 4; ++e) {
        const float x = s[n].x[e];
        // The approximate try first (kernels/cuda/softmax_fast.cuh): kept only
        // when it rounds as exp_poly's value does. Rounded here as add_product
        // rounds it, so that l sums exactly the weights the values get.
        float p = 0.0f;
        if (x != flash::neg_inf() && !softmax_term_fast(x, m[e / 2], kSoftmaxFastMargin, p)) {
          p = softmax_term(x, m[e / 2]);
        }
        p = bf16_to_float(float_to_bf16_rn(p));
        s[n].x[e] = p;
        l[e / 2] += p;
      }
    }
    for (mma::FragC& c : acc)
      for (int e = 0; e < 4; ++e) c.x[e] *= alpha[e / 2];
    flash::add_product<kN, kHs>(acc, s, sv.v);
  }

  float inv[2];
  for (int half = 0; half < 2; ++half) {
    const float sum = flash::quad_sum(l[half]);
    inv[half] = 1.0f / sum;
    const int query = row_first + flash::frag_row(2 * half);
    if (lane_id() % 4 == 0 && query < T) lse[size_t(bh) * size_t(T) + query] = m[half] + logf(sum);
  }
  flash::store_rows<kHs>(out + size_t(b) * size_t(T) * size_t(C) + size_t(h) * kHs, size_t(C),
                         row_first, T, acc, inv, false);
}

template <int kHs>
void launch_forward(void* out, float* lse, const void* qkv, int B, int T, int NH, Stream stream) {
  const dim3 grid(unsigned(B * NH), unsigned((T + kRows - 1) / kRows));
  launch(flash_forward<kHs>, grid, kThreads, 0, stream, "flash attention forward",
         static_cast<uint16_t*>(out), lse, static_cast<const uint16_t*>(qkv), T, NH,
         attention_scale(kHs));
}

}  // namespace

void flash_attention_forward(DType dt, void* out, float* lse, const void* qkv, int B, int T, int C,
                             int NH, Stream stream) {
  const void* tensors[] = {out, qkv};
  flash::check_args("flash_attention_forward", dt, B, T, C, NH, tensors, 2);
  if (C / NH == 64)
    launch_forward<64>(out, lse, qkv, B, T, NH, stream);
  else
    launch_forward<128>(out, lse, qkv, B, T, NH, stream);
}

}  // namespace srkit::cuda
