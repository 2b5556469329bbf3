// Fused causal attention backward (kernels/cuda/flash_attention.h), in three
// kernels on the stream, none with atomics:
//   1. D = rowsum(dout * out) per row of [B,NH,T], into the scratch;
//   2. per (batch and head, tile of kRows keys): dK and dV over the query
//      tiles from the keys' own tile to T, in increasing order;
//   3. per (batch and head, tile of kRows queries): dQ over the key tiles from
//      0 to the queries' own tile, in increasing order.
// 2 and 3 both recompute P = exp_poly(s - lse) and dS = P * (dP - D) (with
// dP = dout . v; both tried first with the approximate exp2 for the same bf16
// operands, kernels/cuda/softmax_fast.cuh) for their tile pairs: twice the
// score products of a single pass, the price of every gradient element having
// one owner, hence a fixed order of its sum and the same bits on every run.
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
using flash::kWarps;

// P = softmax_term(x, lse) and dS = P (dP - D) for one score, both 0 where
// masked: the approximate try first (kernels/cuda/softmax_fast.cuh), kept only
// when both round (in add_product) as exp_poly's values do.
__device__ __forceinline__ void p_and_ds(bool masked, float x, float lse, float w, float& p,
                                         float& ds) {
  p = 0.0f;
  ds = 0.0f;
  if (!masked && !softmax_term_and_product_fast(x, lse, w, kSoftmaxFastMargin, p, ds)) {
    p = softmax_term(x, lse);
    ds = p * w;
  }
}

// dsum[row] = sum over i of dout[b,t,h*hs+i] * out[b,t,h*hs+i], row = (b*NH +
// h)*T + t: one warp per row, lanes over i, then the warp's butterfly (a fixed
// order). Every warp reaches the reduction, rows past the end sum nothing.
template <int kHs>
__global__ void __launch_bounds__(kThreads)
    flash_row_dot(float* __restrict__ dsum, const uint16_t* __restrict__ dout,
                  const uint16_t* __restrict__ out, int T, int NH, size_t rows) {
  const size_t row = size_t(blockIdx.x) * kWarps + size_t(warp_id());
  const bool valid = row < rows;
  const size_t bh = valid ? row / size_t(T) : 0, t = valid ? row % size_t(T) : 0;
  const size_t C = size_t(NH) * kHs;
  const size_t at = (bh / size_t(NH) * size_t(T) + t) * C + bh % size_t(NH) * kHs;
  float sum = 0.0f;
  if (valid)
    for (int i = lane_id(); i < kHs; i += kWarpSize)
      sum += bf16_to_float(bf16{dout[at + i]}) * bf16_to_float(bf16{out[at + i]});
  sum = warp_sum(sum);
  if (valid && lane_id() == 0) dsum[row] = sum;
}

// grid: x = b * NH + h, y = key tile (the first, with the most queries, first).
// Warp w owns keys k0 + 16w ..; the key and value tiles are read once into
// fragments, after which their shared space holds the query and dout tiles.
template <int kHs>
__global__ void __launch_bounds__(kThreads)
    flash_backward_kv(uint16_t* __restrict__ dqkv, bool accumulate,
                      const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                      const float* __restrict__ lse, const float* __restrict__ dsum, int T, int NH,
                      float scale) {
  constexpr int kN = kTile<kHs>;
  union Shared {
    struct {
      flash::Tile<kRows, kHs> k, v;
    } kv;
    struct {
      flash::Tile<kN, kHs> q, g;
    } qg;
  };
  __shared__ Shared sm;
  __shared__ float s_lse[kN], s_d[kN];
  const int bh = int(blockIdx.x), b = bh / NH, h = bh % NH;
  const int C = NH * kHs;
  const size_t stride = 3 * size_t(C);
  const int k0 = int(blockIdx.y) * kRows, warp = warp_id();
  const uint16_t* x = qkv + size_t(b) * size_t(T) * stride + size_t(h) * kHs;
  const uint16_t* g_rows = dout + size_t(b) * size_t(T) * size_t(C) + size_t(h) * kHs;
  const float* lse_bh = lse + size_t(bh) * size_t(T);
  const float* d_bh = dsum + size_t(bh) * size_t(T);

  flash::load_tile<kRows, kHs>(sm.kv.k.v, x + C, stride, k0, T);
  flash::load_tile<kRows, kHs>(sm.kv.v.v, x + 2 * C, stride, k0, T);
  __syncthreads();
  mma::FragA kf[kHs / 16], vf[kHs / 16];
  flash::load_rows<kHs>(kf, sm.kv.k.v + 16 * warp * kLd<kHs>);
  flash::load_rows<kHs>(vf, sm.kv.v.v + 16 * warp * kLd<kHs>);

  mma::FragC dk[kHs / 8], dv[kHs / 8];
  for (mma::FragC& c : dk) mma::zero(c);
  for (mma::FragC& c : dv) mma::zero(c);
  const int key_first = k0 + 16 * warp;
  // Queries before k0 see none of the block's keys: their tiles are skipped.
  for (int q0 = k0 / kN * kN; q0 < T; q0 += kN) {
    // Every warp has its fragments (first pass) or is done with the previous
    // query tiles before the shared space is overwritten.
    __syncthreads();
    flash::load_tile<kN, kHs>(sm.qg.q.v, x, stride, q0, T);
    flash::load_tile<kN, kHs>(sm.qg.g.v, g_rows, size_t(C), q0, T);
    for (int i = int(threadIdx.x); i < kN; i += int(blockDim.x)) {
      s_lse[i] = q0 + i < T ? lse_bh[q0 + i] : 0.0f;
      s_d[i] = q0 + i < T ? d_bh[q0 + i] : 0.0f;
    }
    __syncthreads();
    // Transposed scores: rows are the warp's keys, columns the tile's queries.
    mma::FragC p[kN / 8], ds[kN / 8];
    flash::dot_rows<kN, kHs>(p, kf, sm.qg.q.v);
    flash::dot_rows<kN, kHs>(ds, vf, sm.qg.g.v);  // dP^T = v . dout
    // Only a tile starting before the block's last key or reaching past T has
    // masked pairs (query < key or query >= T): P and dS exactly 0 there.
    const bool masked_tile = q0 < k0 + kRows - 1 || q0 + kN > T;
    SRKIT_UNROLL
    for (int n = 0; n < kN / 8; ++n) {
      SRKIT_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * n + flash::frag_col(e), query = q0 + col;
        const int key = key_first + flash::frag_row(e);
        const bool masked = masked_tile && (query < key || query >= T);
        p_and_ds(masked, p[n].x[e] * scale, s_lse[col], ds[n].x[e] - s_d[col], p[n].x[e],
                 ds[n].x[e]);
      }
    }
    flash::add_product<kN, kHs>(dv, p, sm.qg.g.v);   // dV += P^T dout
    flash::add_product<kN, kHs>(dk, ds, sm.qg.q.v);  // dK += dS^T q (scaled at the store)
  }
  uint16_t* dx = dqkv + size_t(b) * size_t(T) * stride + size_t(h) * kHs;
  const float by_scale[2] = {scale, scale}, by_one[2] = {1.0f, 1.0f};
  flash::store_rows<kHs>(dx + C, stride, key_first, T, dk, by_scale, accumulate);
  flash::store_rows<kHs>(dx + 2 * C, stride, key_first, T, dv, by_one, accumulate);
}

// grid: x = b * NH + h, y = query tile, the last (most keys) first. Warp w
// owns queries q0 + 16w ..; the query and dout tiles are read once into
// fragments, after which their shared space holds the key and value tiles.
template <int kHs>
__global__ void __launch_bounds__(kThreads)
    flash_backward_q(uint16_t* __restrict__ dqkv, bool accumulate, const uint16_t* __restrict__ qkv,
                     const uint16_t* __restrict__ dout, const float* __restrict__ lse,
                     const float* __restrict__ dsum, int T, int NH, float scale) {
  constexpr int kN = kTile<kHs>;
  union Shared {
    struct {
      flash::Tile<kRows, kHs> q, g;
    } qg;
    struct {
      flash::Tile<kN, kHs> k, v;
    } kv;
  };
  __shared__ Shared sm;
  const int bh = int(blockIdx.x), b = bh / NH, h = bh % NH;
  const int C = NH * kHs;
  const size_t stride = 3 * size_t(C);
  const int q0 = (int(gridDim.y) - 1 - int(blockIdx.y)) * kRows, warp = warp_id();
  const uint16_t* x = qkv + size_t(b) * size_t(T) * stride + size_t(h) * kHs;
  const uint16_t* g_rows = dout + size_t(b) * size_t(T) * size_t(C) + size_t(h) * kHs;

  flash::load_tile<kRows, kHs>(sm.qg.q.v, x, stride, q0, T);
  flash::load_tile<kRows, kHs>(sm.qg.g.v, g_rows, size_t(C), q0, T);
  __syncthreads();
  mma::FragA qf[kHs / 16], gf[kHs / 16];
  flash::load_rows<kHs>(qf, sm.qg.q.v + 16 * warp * kLd<kHs>);
  flash::load_rows<kHs>(gf, sm.qg.g.v + 16 * warp * kLd<kHs>);
  const int row_first = q0 + 16 * warp;
  float row_lse[2], row_d[2];
  for (int half = 0; half < 2; ++half) {
    const int query = row_first + flash::frag_row(2 * half);
    row_lse[half] = query < T ? lse[size_t(bh) * size_t(T) + query] : 0.0f;
    row_d[half] = query < T ? dsum[size_t(bh) * size_t(T) + query] : 0.0f;
  }

  mma::FragC dq[kHs / 8];
  for (mma::FragC& c : dq) mma::zero(c);
  // Keys past the block's last query are masked for every row: never loaded.
  const int key_end = q0 + kRows < T ? q0 + kRows : T;
  for (int k0 = 0; k0 < key_end; k0 += kN) {
    __syncthreads();  // fragments read (first pass) or the previous tiles used
    flash::load_tile<kN, kHs>(sm.kv.k.v, x + C, stride, k0, T);
    flash::load_tile<kN, kHs>(sm.kv.v.v, x + 2 * C, stride, k0, T);
    __syncthreads();
    mma::FragC p[kN / 8], ds[kN / 8];
    flash::dot_rows<kN, kHs>(p, qf, sm.kv.k.v);
    flash::dot_rows<kN, kHs>(ds, gf, sm.kv.v.v);  // dP = dout . v
    const bool masked_tile = k0 + kN - 1 > q0 || k0 + kN > T;
    SRKIT_UNROLL
    for (int n = 0; n < kN / 8; ++n) {
      SRKIT_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + 8 * n + flash::frag_col(e), query = row_first + flash::frag_row(e);
        const bool masked = masked_tile && (key > query || key >= T);
        float pe;
        p_and_ds(masked, p[n].x[e] * scale, row_lse[e / 2], ds[n].x[e] - row_d[e / 2], pe,
                 ds[n].x[e]);
      }
    }
    flash::add_product<kN, kHs>(dq, ds, sm.kv.k.v);  // dQ += dS k (scaled at the store)
  }
  const float by_scale[2] = {scale, scale};
  flash::store_rows<kHs>(dqkv + size_t(b) * size_t(T) * stride + size_t(h) * kHs, stride, row_first,
                         T, dq, by_scale, accumulate);
}

template <int kHs>
void launch_backward(void* dqkv, bool accumulate, const void* dout, const void* qkv,
                     const void* out, const float* lse, float* dsum, int B, int T, int NH,
                     Stream stream) {
  const size_t rows = size_t(B) * size_t(NH) * size_t(T);
  const auto* g = static_cast<const uint16_t*>(dout);
  const auto* x = static_cast<const uint16_t*>(qkv);
  auto* dx = static_cast<uint16_t*>(dqkv);
  const float scale = attention_scale(kHs);
  launch(flash_row_dot<kHs>, unsigned((rows + kWarps - 1) / kWarps), kThreads, 0, stream,
         "flash attention backward rowsum", dsum, g, static_cast<const uint16_t*>(out), T, NH,
         rows);
  const dim3 grid(unsigned(B * NH), unsigned((T + kRows - 1) / kRows));
  launch(flash_backward_kv<kHs>, grid, kThreads, 0, stream, "flash attention backward dk dv", dx,
         accumulate, x, g, lse, dsum, T, NH, scale);
  launch(flash_backward_q<kHs>, grid, kThreads, 0, stream, "flash attention backward dq", dx,
         accumulate, x, g, lse, dsum, T, NH, scale);
}

}  // namespace

void flash_attention_backward(DType dt, void* dqkv, GradWrite dqkv_mode, const void* dout,
                              const void* qkv, const void* out, const float* lse, void* scratch,
                              int B, int T, int C, int NH, Stream stream) {
  const void* tensors[] = {dqkv, dout, qkv, out};
  flash::check_args("flash_attention_backward", dt, B, T, C, NH, tensors, 4);
  const bool accumulate = dqkv_mode == GradWrite::kAccumulate;
  float* dsum = static_cast<float*>(scratch);
  if (C / NH == 64)
    launch_backward<64>(dqkv, accumulate, dout, qkv, out, lse, dsum, B, T, NH, stream);
  else
    launch_backward<128>(dqkv, accumulate, dout, qkv, out, lse, dsum, B, T, NH, stream);
}

}  // namespace srkit::cuda
