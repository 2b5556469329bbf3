// Causal self-attention (kernels/cuda/attention.h) as llm.c's CUDA trainer
// shapes it: permute q, k, v head-major, batched cuBLASLt GEMMs for the scores
// and the weighted values, a causal softmax kernel between them, permute the
// output back. The softmax keeps each row's maximum and sum as the layer's
// state; backward recomputes the probabilities from them through the same
// code as forward (bit for bit), then
//   dP = dy v^T,  dS = P * (dP - rowsum(P * dP)) * scale,
//   dv = P^T dy,  dq = dS k,  dk = dS^T q,
// and adds dq, dk, dv (fp32, rounded once) into dinp [B,T,3C].
//
// The element math is the CPU's (kernels/cpu/attention.cpp): scores are
// scale * (q . k) in fp32; probabilities are exp_poly(s - max) * (1 / sum),
// rounded to dt, with masked entries (t2 > t) exactly 0; y = P @ v uses P as
// stored. The GEMMs run over the whole T x T square (masked entries are 0, so
// they add nothing): half the score FLOPs are spent on the masked triangle, the
// price of using cuBLASLt's dense batched GEMMs. dS is stored in dt, the
// operand type of the dq and dk GEMMs (tensor cores for bf16), where the CPU
// keeps it in fp32: one more bf16 rounding (2^-9 relative) per element, within
// the suite's attention bound (tests/conformance/tolerances.h). dq, dk, dv come
// out in fp32 and are rounded once, into dinp. In the CPU emulation the GEMMs
// add in the CPU's order, so with fp32 storage only the order of the softmax's
// two row sums (sum of exponentials, rowsum(P * dP)) differs from the CPU.
//
// Scratch layout and state: kernels/cuda/attention_layout.h.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/common/softmax.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/elements.cuh"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/warp.cuh"

namespace srkit::cuda {
namespace {

void check_shape(const char* op, int B, int T, int C, int NH) {
  if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH != 0) {
    throw std::invalid_argument(std::string(op) + ": bad shape B=" + std::to_string(B) +
                                " T=" + std::to_string(T) + " C=" + std::to_string(C) + " NH=" +
                                std::to_string(NH) + " (expected all > 0 and C divisible by NH)");
  }
}

constexpr int kThreads = 256;
// Softmax kernels: one warp per row of [B,NH,T] (lanes stride the row, so
// every load and store of a warp covers consecutive elements: coalesced);
// T <= 2048 keeps a block's rows (at most 8 x 8 KiB of scores) in L1 between
// the passes over them.
constexpr int kRowsPerBlock = kThreads / kWarpSize;
constexpr size_t kMaxGrid = 65535;  // grid-stride beyond

unsigned blocks_for(size_t items, size_t per_block) {
  const size_t blocks = (items + per_block - 1) / per_block;
  return unsigned(blocks < kMaxGrid ? blocks : kMaxGrid);
}

// ---- permutes --------------------------------------------------------------------

// Between rows [B,T, parts * NH * hu] and `parts` head-major tensors
// [B,NH,T,hu] (part p at heads + p * part_stride), in units U of 2 to 16
// bytes: a head row is hu units, so with hs * sizeof(dt) a multiple of 16 each
// thread moves 128 bits. A block walks one (b,t) row at a time, its threads
// on consecutive units (coalesced on the row side; on the head side runs of hu
// units, 128 bytes for hs = 64 in bf16).
template <typename U, bool kToHeads>
__global__ void permute_heads(U* rows, U* heads, size_t part_stride, int parts, int NH, int T,
                              int hu, size_t BT) {
  const int row_units = parts * NH * hu;
  for (size_t row = blockIdx.x; row < BT; row += gridDim.x) {
    const size_t b = row / size_t(T), t = row % size_t(T);
    U* r = rows + row * size_t(row_units);
    for (int u = int(threadIdx.x); u < row_units; u += int(blockDim.x)) {
      const int j = u % hu, ph = u / hu;
      const int h = ph % NH, part = ph / NH;
      U* hd = heads + size_t(part) * part_stride +
              ((b * size_t(NH) + size_t(h)) * size_t(T) + t) * size_t(hu) + size_t(j);
      if constexpr (kToHeads) {
        *hd = r[u];
      } else {
        r[u] = *hd;
      }
    }
  }
}

// Units of 16 and 8 bytes, spelled here (not CUDA's uint4 / uint2) so that
// both builds have them; the alignment makes nvcc move each in one access.
struct alignas(16) Bytes16 {
  uint32_t w[4];
};
struct alignas(8) Bytes8 {
  uint32_t w[2];
};

// The widest unit dividing the head row and every address and part stride.
size_t unit_bytes(size_t head_row_bytes, const void* rows, const void* heads,
                  size_t part_stride_bytes) {
  const uintptr_t all = uintptr_t(head_row_bytes) | reinterpret_cast<uintptr_t>(rows) |
                        reinterpret_cast<uintptr_t>(heads) | uintptr_t(part_stride_bytes);
  size_t unit = 16;
  while (unit > 2 && all % unit != 0) unit /= 2;  // elements are 2 or 4 bytes
  return unit;
}

template <typename U>
void permute_as(bool to_heads, void* rows, void* heads, size_t part_stride_bytes, int parts, int B,
                int T, int NH, size_t head_row_bytes, Stream stream) {
  const size_t BT = size_t(B) * size_t(T);
  const int hu = int(head_row_bytes / sizeof(U));
  U* r = static_cast<U*>(rows);
  U* h = static_cast<U*>(heads);
  const size_t stride = part_stride_bytes / sizeof(U);
  if (to_heads) {
    launch(permute_heads<U, true>, blocks_for(BT, 1), kThreads, 0, stream, "attention permute", r,
           h, stride, parts, NH, T, hu, BT);
  } else {
    launch(permute_heads<U, false>, blocks_for(BT, 1), kThreads, 0, stream, "attention unpermute",
           r, h, stride, parts, NH, T, hu, BT);
  }
}

// Copies rows [B,T,parts*C] into head-major tensors (to_heads) or back.
void permute(bool to_heads, DType dt, const void* rows, void* heads, size_t part_stride_bytes,
             int parts, int B, int T, int C, int NH, Stream stream) {
  const size_t head_row_bytes = size_t(C / NH) * dtype_size(dt);
  void* r = const_cast<void*>(rows);  // written only when !to_heads
  switch (unit_bytes(head_row_bytes, rows, heads, part_stride_bytes)) {
    case 16:
      return permute_as<Bytes16>(to_heads, r, heads, part_stride_bytes, parts, B, T, NH,
                                 head_row_bytes, stream);
    case 8:
      return permute_as<Bytes8>(to_heads, r, heads, part_stride_bytes, parts, B, T, NH,
                                head_row_bytes, stream);
    case 4:
      return permute_as<uint32_t>(to_heads, r, heads, part_stride_bytes, parts, B, T, NH,
                                  head_row_bytes, stream);
    default:
      return permute_as<uint16_t>(to_heads, r, heads, part_stride_bytes, parts, B, T, NH,
                                  head_row_bytes, stream);
  }
}

// dinp[b,t, part*C + h*hs + i] = RN(base + grad_part[b,h,t,i]) for the fp32
// gradients dq, dk, dv (part_stride floats apart): the CPU's one rounding of
// the stored value (accumulate) or 0 plus the fp32 sum. Rows as in
// permute_heads, threads along the dinp row (coalesced stores).
template <typename T>
__global__ void add_head_grads(T* __restrict__ dinp, const float* __restrict__ grads,
                               size_t part_stride, int NH, int Tn, int hs, size_t BT,
                               bool accumulate) {
  const int C = NH * hs, row_len = 3 * C;
  for (size_t row = blockIdx.x; row < BT; row += gridDim.x) {
    const size_t b = row / size_t(Tn), t = row % size_t(Tn);
    T* d = dinp + row * size_t(row_len);
    for (int c = int(threadIdx.x); c < row_len; c += int(blockDim.x)) {
      const int part = c / C, h = (c % C) / hs, i = c % hs;
      const float g =
          grads[size_t(part) * part_stride +
                ((b * size_t(NH) + size_t(h)) * size_t(Tn) + t) * size_t(hs) + size_t(i)];
      d[c] = from_f32<T>(grad_base(d[c], accumulate) + g);
    }
  }
}

// ---- softmax ------------------------------------------------------------------------

__device__ __forceinline__ float max_of(float a, float b) { return a < b ? b : a; }

// probs[row, t2] = RN_dt(exp_poly(s - max) * (1 / sum)) for t2 <= t, 0 beyond;
// row = (b, h, t) of `rows`. Forward (recompute = false) finds max and sum
// (each lane over its strided elements in order, then the warp's butterfly:
// a fixed order) and stores them in state; backward (recompute = true) reads
// them instead and makes the same bits through the same expression. Three
// passes over the row's scores (max, sum, write) rather than an online
// softmax: the online rescaling would change the CPU's arithmetic. Every warp
// reaches both warp reductions (rows past the end reduce nothing).
template <typename T>
__global__ void softmax_causal(const float* __restrict__ scores, T* __restrict__ probs,
                               float* __restrict__ state, size_t rows, int Tn, bool recompute) {
  const size_t row = size_t(blockIdx.x) * kRowsPerBlock + size_t(warp_id());
  const int lane = lane_id();
  const bool valid = row < rows;
  const int t = valid ? int(row % size_t(Tn)) : 0;
  const int n = valid && !recompute ? t + 1 : 0;  // the visible keys this warp reduces
  const float* s = scores + (valid ? row : 0) * size_t(Tn);
  float mx = bits_as_float(0xff800000u);  // -inf
  for (int j = lane; j < n; j += kWarpSize) mx = max_of(mx, s[j]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int j = lane; j < n; j += kWarpSize) sum += softmax_term(s[j], mx);
  sum = warp_sum(sum);
  if (!valid) return;  // after the last warp call
  if (recompute) {
    mx = state[2 * row];
    sum = state[2 * row + 1];
  } else if (lane == 0) {
    state[2 * row] = mx;
    state[2 * row + 1] = sum;
  }
  const float inv = 1.0f / sum;
  T* p = probs + row * size_t(Tn);
  for (int j = lane; j < Tn; j += kWarpSize) {
    p[j] = from_f32<T>(j <= t ? softmax_prob(s[j], mx, inv) : 0.0f);
  }
}

// In place over the probabilities: pd[row, t2] = RN_dt(P * (dP - dot) * scale)
// for t2 <= t, 0 beyond, with dot = sum over t2 <= t of P * dP (per lane in
// order, then the warp's butterfly). The CPU's formula and order of operations
// (p * (dp - dot), then * scale). Each lane reads an element before it writes
// it, and only its own elements.
template <typename T>
__global__ void softmax_causal_backward(T* pd, const float* __restrict__ dprobs, size_t rows,
                                        int Tn, float scale) {
  const size_t row = size_t(blockIdx.x) * kRowsPerBlock + size_t(warp_id());
  const int lane = lane_id();
  const bool valid = row < rows;
  const int t = valid ? int(row % size_t(Tn)) : 0;
  const int n = valid ? t + 1 : 0;
  T* p = pd + (valid ? row : 0) * size_t(Tn);
  const float* dp = dprobs + (valid ? row : 0) * size_t(Tn);
  float dot = 0.0f;
  for (int j = lane; j < n; j += kWarpSize) dot += widen(p[j]) * dp[j];
  dot = warp_sum(dot);
  if (!valid) return;  // after the last warp call
  for (int j = lane; j < Tn; j += kWarpSize) {
    p[j] = from_f32<T>(j <= t ? (widen(p[j]) * (dp[j] - dot)) * scale : 0.0f);
  }
}

void softmax(DType dt, const float* scores, void* probs, float* state, size_t rows, int T,
             bool recompute, Stream stream) {
  const unsigned grid = unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  if (dt == DType::kF32) {
    launch(softmax_causal<float>, grid, kThreads, 0, stream, "attention softmax", scores,
           static_cast<float*>(probs), state, rows, T, recompute);
  } else {
    launch(softmax_causal<bf16>, grid, kThreads, 0, stream, "attention softmax", scores,
           static_cast<bf16*>(probs), state, rows, T, recompute);
  }
}

// ---- the pieces both directions share ---------------------------------------------------

struct Buffers {
  AttentionLayout layout;
  char* base;
  void* head(int i) const { return base + layout.head_offset(i); }
  float* grad(int i) const { return reinterpret_cast<float*>(base + layout.grad_offset(i)); }
  float* scores() const { return reinterpret_cast<float*>(base + layout.scores_offset()); }
  void* probs() const { return base + layout.probs_offset(); }
};

struct Dims {
  int B, T, C, NH, hs;
  float scale;
  long long TT() const { return (long long)T * T; }
  long long Ths() const { return (long long)T * hs; }
};

// A [T,T] x [T,hs] family of per-(b,h) products over the B*NH heads.
Gemm::Batched per_head(const Dims& d, bool trans_a, bool trans_b, int M, int N, int K,
                       long long lda, long long ldb, long long ldd, long long stride_a,
                       long long stride_b, long long stride_d, float alpha) {
  Gemm::Batched g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.M = M;
  g.N = N;
  g.K = K;
  g.batch = d.B * d.NH;
  g.lda = lda;
  g.ldb = ldb;
  g.ldd = ldd;
  g.stride_a = stride_a;
  g.stride_b = stride_b;
  g.stride_d = stride_d;
  g.alpha = alpha;
  g.beta = 0.0f;
  return g;
}

// q, k, v from inp; scores = scale q k^T (fp32); probabilities from them
// (forward: finds and stores each row's max and sum; backward: reads them).
void probabilities(Gemm& gemm, DType dt, const Buffers& buf, const Dims& d, const void* inp,
                   float* state, bool recompute, Stream stream) {
  permute(true, dt, inp, buf.head(AttentionLayout::kQ), buf.layout.head_stride(), 3, d.B, d.T, d.C,
          d.NH, stream);
  // S[T,T] = scale * q[T,hs] k[T,hs]^T
  gemm.batched(
      per_head(d, false, true, d.T, d.T, d.hs, d.hs, d.hs, d.T, d.Ths(), d.Ths(), d.TT(), d.scale),
      dt, buf.head(AttentionLayout::kQ), buf.head(AttentionLayout::kK), DType::kF32, buf.scores());
  softmax(dt, buf.scores(), buf.probs(), state, size_t(d.B) * d.NH * d.T, d.T, recompute, stream);
}

Dims dims(int B, int T, int C, int NH) {
  const int hs = C / NH;
  return {B, T, C, NH, hs, attention_scale(hs)};  // the CPU's scale
}

}  // namespace

void attention_forward(Gemm& gemm, DType dt, void* out, void* state, void* scratch, const void* inp,
                       int B, int T, int C, int NH, Stream stream) {
  check_shape("attention_forward", B, T, C, NH);
  if (flash_attention_supported(dt, C, NH)) {
    flash_attention_forward(dt, out, static_cast<float*>(state), inp, B, T, C, NH, stream);
    return;
  }
  const Dims d = dims(B, T, C, NH);
  const Buffers buf{attention_layout(dt, B, T, C, NH), static_cast<char*>(scratch)};
  probabilities(gemm, dt, buf, d, inp, static_cast<float*>(state), false, stream);
  // y[T,hs] = P[T,T] v[T,hs], rounded once to dt
  gemm.batched(per_head(d, false, false, T, d.hs, T, T, d.hs, d.hs, d.TT(), d.Ths(), d.Ths(), 1.0f),
               dt, buf.probs(), buf.head(AttentionLayout::kV), dt, buf.head(AttentionLayout::kY));
  permute(false, dt, out, buf.head(AttentionLayout::kY), buf.layout.head_stride(), 1, B, T, C, NH,
          stream);
}

void attention_backward(Gemm& gemm, DType dt, void* dinp, GradWrite dinp_mode, const void* dout,
                        const void* inp, const void* out, const void* state, void* scratch, int B,
                        int T, int C, int NH, Stream stream) {
  check_shape("attention_backward", B, T, C, NH);
  if (flash_attention_supported(dt, C, NH)) {
    const AttentionLayout l = attention_layout(dt, B, T, C, NH);
    flash_attention_backward(dt, dinp, dinp_mode, dout, inp, out, static_cast<const float*>(state),
                             static_cast<char*>(scratch) + l.flash_scratch_offset(), B, T, C, NH,
                             stream);
    return;
  }
  // The unfused path sums rowsum(P dP) directly and does not read out.
  const Dims d = dims(B, T, C, NH);
  const Buffers buf{attention_layout(dt, B, T, C, NH), static_cast<char*>(scratch)};
  // The state is only read when recomputing.
  probabilities(gemm, dt, buf, d, inp, static_cast<float*>(const_cast<void*>(state)), true, stream);
  void* q = buf.head(AttentionLayout::kQ);
  void* k = buf.head(AttentionLayout::kK);
  void* v = buf.head(AttentionLayout::kV);
  void* dy = buf.head(AttentionLayout::kY);
  permute(true, dt, dout, dy, buf.layout.head_stride(), 1, B, T, C, NH, stream);
  // dv[T,hs] = P^T dy (P stored [T,T])
  gemm.batched(per_head(d, true, false, T, d.hs, T, T, d.hs, d.hs, d.TT(), d.Ths(), d.Ths(), 1.0f),
               dt, buf.probs(), dy, DType::kF32, buf.grad(2));
  // dP[T,T] = dy v^T, into the scores' place
  gemm.batched(per_head(d, false, true, T, T, d.hs, d.hs, d.hs, T, d.Ths(), d.Ths(), d.TT(), 1.0f),
               dt, dy, v, DType::kF32, buf.scores());
  // dS over P, in dt (the operand type of the next GEMMs)
  const size_t rows = size_t(B) * NH * T;
  const unsigned grid = unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  if (dt == DType::kF32) {
    launch(softmax_causal_backward<float>, grid, kThreads, 0, stream, "attention softmax backward",
           static_cast<float*>(buf.probs()), static_cast<const float*>(buf.scores()), rows, T,
           d.scale);
  } else {
    launch(softmax_causal_backward<bf16>, grid, kThreads, 0, stream, "attention softmax backward",
           static_cast<bf16*>(buf.probs()), static_cast<const float*>(buf.scores()), rows, T,
           d.scale);
  }
  // dq[T,hs] = dS k;  dk[T,hs] = dS^T q
  gemm.batched(per_head(d, false, false, T, d.hs, T, T, d.hs, d.hs, d.TT(), d.Ths(), d.Ths(), 1.0f),
               dt, buf.probs(), k, DType::kF32, buf.grad(0));
  gemm.batched(per_head(d, true, false, T, d.hs, T, T, d.hs, d.hs, d.TT(), d.Ths(), d.Ths(), 1.0f),
               dt, buf.probs(), q, DType::kF32, buf.grad(1));
  const size_t BT = size_t(B) * T;
  const size_t part_stride = buf.layout.grad_stride() / sizeof(float);
  const bool accumulate = dinp_mode == GradWrite::kAccumulate;
  if (dt == DType::kF32) {
    launch(add_head_grads<float>, blocks_for(BT, 1), kThreads, 0, stream, "attention dinp",
           static_cast<float*>(dinp), static_cast<const float*>(buf.grad(0)), part_stride, NH, T,
           d.hs, BT, accumulate);
  } else {
    launch(add_head_grads<bf16>, blocks_for(BT, 1), kThreads, 0, stream, "attention dinp",
           static_cast<bf16*>(dinp), static_cast<const float*>(buf.grad(0)), part_stride, NH, T,
           d.hs, BT, accumulate);
  }
}

}  // namespace srkit::cuda
