// Causal self-attention, forward and backward, one (batch, head) per task. Each
// task widens its q, k, v slices into fp32 thread-local buffers laid out so every
// inner loop is a contiguous, vectorizable axpy (k and v transposed where the
// loop runs over key positions); all sums then run in a fixed order.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/softmax.h"

namespace srkit::cpu {
namespace {

void check_shape(const char* op, int B, int Tn, int C, int NH) {
  if (B <= 0 || Tn <= 0 || C <= 0 || NH <= 0 || C % NH != 0) {
    throw std::invalid_argument(std::string(op) + ": bad shape B=" + std::to_string(B) +
                                " T=" + std::to_string(Tn) + " C=" + std::to_string(C) + " NH=" +
                                std::to_string(NH) + " (expected all > 0 and C divisible by NH)");
  }
}

// The q, k or v slice of head h (columns part*C + h*hs ...) of one batch row block.
struct HeadView {
  size_t row_stride;  // 3C
  size_t offset;      // part * C + h * hs
};

// dst[t * hs + i] = src[t, offset + i]
template <typename T>
void load_rows(float* dst, const T* src, HeadView v, int Tn, int hs) {
  for (int t = 0; t < Tn; ++t) {
    const T* s = src + size_t(t) * v.row_stride + v.offset;
#pragma omp simd
    for (int i = 0; i < hs; ++i) dst[size_t(t) * hs + i] = to_f32(s[i]);
  }
}

// dst[i * Tn + t] = src[t, offset + i]
template <typename T>
void load_transposed(float* dst, const T* src, HeadView v, int Tn, int hs) {
  for (int t = 0; t < Tn; ++t) {
    const T* s = src + size_t(t) * v.row_stride + v.offset;
    for (int i = 0; i < hs; ++i) dst[size_t(i) * Tn + t] = to_f32(s[i]);
  }
}

// dst[t, offset + i] = RN(base + acc[t * hs + i]), base the stored value
// (accumulate) or 0: the gradient store.
template <typename T>
void store_rows(T* dst, const float* acc, HeadView v, int Tn, int hs, bool accumulate) {
  for (int t = 0; t < Tn; ++t) {
    T* d = dst + size_t(t) * v.row_stride + v.offset;
#pragma omp simd
    for (int i = 0; i < hs; ++i) {
      d[i] = from_f32<T>(grad_base(d[i], accumulate) + acc[size_t(t) * hs + i]);
    }
  }
}

// For each of Q outputs: y[q][j] += sum over r = 0..R-1, in that order, of
// a[q][r] * X[r][j] (rows of X at stride ld), for j < n. The Q outputs share
// every load of X (a block of Q query rows reads the keys or values once, not Q
// times), and four rows per pass keep y[q][j] in a register across four
// updates; each y[q][j] still adds r = 0, 1, 2, ... in order, so the bits equal
// those of the plain one-row-at-a-time loop, whatever Q and wherever R is split.
template <int Q>
void add_rows_block(float* const* y, const float* const* a, const float* X, size_t ld, int R,
                    int n) {
  int r = 0;
  for (; r + 4 <= R; r += 4) {
    float c[Q][4];
    for (int q = 0; q < Q; ++q) {
      for (int k = 0; k < 4; ++k) c[q][k] = a[q][r + k];
    }
    const float* x0 = X + size_t(r) * ld;
    const float *x1 = x0 + ld, *x2 = x1 + ld, *x3 = x2 + ld;
#pragma omp simd
    for (int j = 0; j < n; ++j) {
      const float v0 = x0[j], v1 = x1[j], v2 = x2[j], v3 = x3[j];
      for (int q = 0; q < Q; ++q) {
        y[q][j] = (((y[q][j] + c[q][0] * v0) + c[q][1] * v1) + c[q][2] * v2) + c[q][3] * v3;
      }
    }
  }
  for (; r < R; ++r) {
    float c[Q];
    for (int q = 0; q < Q; ++q) c[q] = a[q][r];
    const float* xr = X + size_t(r) * ld;
#pragma omp simd
    for (int j = 0; j < n; ++j) {
      for (int q = 0; q < Q; ++q) y[q][j] += c[q] * xr[j];
    }
  }
}

// Blocks of up to kQueryBlock query rows go through add_rows_block together.
// 8 ran fastest of 4, 6, 8, 12 and 16 (bench_attention on Zen 4: the backward
// 10% faster than with 4, the forward 4%); the bits do not depend on it.
constexpr int kQueryBlock = 8;

// add_rows_block<count>, for count in 1 .. Q.
template <int Q>
void add_rows_upto(float* const* y, const float* const* a, int count, const float* X, size_t ld,
                   int R, int n) {
  if constexpr (Q > 1) {
    if (count < Q) return add_rows_upto<Q - 1>(y, a, count, X, ld, R, n);
  }
  add_rows_block<Q>(y, a, X, ld, R, n);
}

void add_rows(float* const* y, const float* const* a, int count, const float* X, size_t ld, int R,
              int n) {
  add_rows_upto<kQueryBlock>(y, a, count, X, ld, R, n);
}

void add_rows(float* y, const float* a, const float* X, size_t ld, int R, int n) {
  add_rows_block<1>(&y, &a, X, ld, R, n);
}

// For each key t2 < t0 + count: y_t2 += sum over the block's rows r = 0 ..
// count - 1 (query t0 + r) that see t2 (t0 + r >= t2), in that order, of
// coef[r][t2] * x_r, rows of hs floats (coef rows at stride ld, x rows at
// stride hs). Each y_t2 is loaded and stored once per block, not once per row,
// and takes its terms in row order, so the bits equal those of updating it
// row after row.
void add_outer(float* y, const float* coef, size_t ld, const float* x, int t0, int count, int hs) {
  for (int t2 = 0; t2 < t0 + count; ++t2) {
    const int first = std::max(0, t2 - t0);  // the first row that sees key t2
    float c[kQueryBlock];
    for (int r = first; r < count; ++r) c[r - first] = coef[size_t(r) * ld + t2];
    add_rows(&y[size_t(t2) * hs], c, &x[size_t(first) * hs], hs, count - first, hs);
  }
}

}  // namespace

template <typename T>
void attention_forward(T* out, T* att, const T* inp, int B, int Tn, int C, int NH) {
  check_shape("attention_forward", B, Tn, C, NH);
  const int hs = C / NH;
  const float scale = attention_scale(hs);
  const size_t C3 = 3 * size_t(C), TT = size_t(Tn) * Tn;
#pragma omp parallel if (parallel : size_t(B) * Tn * Tn * C >= kParallelMinWork)
  {
    std::vector<float> kt(size_t(hs) * Tn), v(size_t(Tn) * hs), q(size_t(Tn) * hs);
    std::vector<float> s(size_t(kQueryBlock) * Tn), acc(size_t(kQueryBlock) * hs);
#pragma omp for collapse(2) schedule(static)
    for (int b = 0; b < B; ++b) {
      for (int h = 0; h < NH; ++h) {
        const T* x = inp + size_t(b) * Tn * C3;
        const size_t head = size_t(h) * hs;
        load_rows(q.data(), x, {C3, head}, Tn, hs);
        load_transposed(kt.data(), x, {C3, C + head}, Tn, hs);
        load_rows(v.data(), x, {C3, 2 * C + head}, Tn, hs);
        T* att_bh = att + (size_t(b) * NH + h) * TT;
        // Query rows t0 .. t0 + count - 1 at a time (they share the loads of k and v).
        for (int t0 = 0; t0 < Tn; t0 += kQueryBlock) {
          const int count = std::min(kQueryBlock, Tn - t0);
          float* srow[kQueryBlock];
          const float* qrow[kQueryBlock];
          float* arow[kQueryBlock];
          for (int k = 0; k < count; ++k) {
            srow[k] = &s[size_t(k) * Tn];
            qrow[k] = &q[size_t(t0 + k) * hs];
            arow[k] = &acc[size_t(k) * hs];
          }
          // s[t2] = q_t . k_t2, accumulated over i in order, for the keys the last
          // row of the block sees (earlier rows' extra scores are never read).
          const int n_block = t0 + count;
          for (int k = 0; k < count; ++k) std::fill_n(srow[k], n_block, 0.0f);
          add_rows(srow, qrow, count, kt.data(), Tn, hs, n_block);
          for (int k = 0; k < count; ++k) {
            const int t = t0 + k, n = t + 1;  // visible keys 0..t
            float* st = srow[k];
            T* att_row = att_bh + size_t(t) * Tn;
            float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
            for (int t2 = 0; t2 < n; ++t2) {
              st[t2] *= scale;
              mx = std::max(mx, st[t2]);
            }
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (int t2 = 0; t2 < n; ++t2) {
              st[t2] = softmax_term(st[t2], mx);
              sum += st[t2];
            }
            const float inv = 1.0f / sum;
#pragma omp simd
            for (int t2 = 0; t2 < n; ++t2) {
              att_row[t2] = from_f32<T>(st[t2] * inv);
              st[t2] = to_f32(att_row[t2]);  // out uses att exactly as stored
            }
            for (int t2 = n; t2 < Tn; ++t2) att_row[t2] = T{};
          }
          // out_t = sum_t2 att[t2] * v_t2, accumulated over t2 in order: keys 0..t0
          // for the whole block, then each row's own last keys t0 + 1 .. t.
          for (int k = 0; k < count; ++k) std::fill_n(arow[k], hs, 0.0f);
          const float* const* att_rows = srow;
          add_rows(arow, att_rows, count, v.data(), hs, t0 + 1, hs);
          for (int k = 1; k < count; ++k) {
            add_rows(arow[k], srow[k] + t0 + 1, &v[size_t(t0 + 1) * hs], hs, k, hs);
          }
          for (int k = 0; k < count; ++k) {
            T* o = out + (size_t(b) * Tn + t0 + k) * C + head;
#pragma omp simd
            for (int i = 0; i < hs; ++i) o[i] = from_f32<T>(arow[k][i]);
          }
        }
      }
    }
  }
}

template <typename T>
void attention_backward(T* dinp, GradWrite dinp_mode, const T* dout, const T* inp, const T* att,
                        int B, int Tn, int C, int NH) {
  check_shape("attention_backward", B, Tn, C, NH);
  const bool acc = dinp_mode == GradWrite::kAccumulate;
  const int hs = C / NH;
  const float scale = attention_scale(hs);
  const size_t C3 = 3 * size_t(C), TT = size_t(Tn) * Tn;
  const size_t THS = size_t(Tn) * hs;
#pragma omp parallel if (parallel : size_t(B) * Tn * Tn * C >= kParallelMinWork)
  {
    std::vector<float> q(THS), k(THS), vt(THS), dq(THS), dk(THS), dv(THS);
    std::vector<float> a(size_t(kQueryBlock) * Tn), da(size_t(kQueryBlock) * Tn);
    std::vector<float> dp(size_t(kQueryBlock) * Tn), g(size_t(kQueryBlock) * hs);
#pragma omp for collapse(2) schedule(static)
    for (int b = 0; b < B; ++b) {
      for (int h = 0; h < NH; ++h) {
        const T* x = inp + size_t(b) * Tn * C3;
        const size_t head = size_t(h) * hs;
        load_rows(q.data(), x, {C3, head}, Tn, hs);
        load_rows(k.data(), x, {C3, C + head}, Tn, hs);
        load_transposed(vt.data(), x, {C3, 2 * C + head}, Tn, hs);
        std::fill(dq.begin(), dq.end(), 0.0f);
        std::fill(dk.begin(), dk.end(), 0.0f);
        std::fill(dv.begin(), dv.end(), 0.0f);
        const T* att_bh = att + (size_t(b) * NH + h) * TT;
        // Query rows t0 .. t0 + count - 1 at a time, as in the forward; dv and dk
        // take their updates in t order (add_outer).
        for (int t0 = 0; t0 < Tn; t0 += kQueryBlock) {
          const int count = std::min(kQueryBlock, Tn - t0);
          const int n_block = t0 + count;
          float *gr[kQueryBlock], *dar[kQueryBlock], *dpr[kQueryBlock], *dqr[kQueryBlock];
          for (int r = 0; r < count; ++r) {
            const int t = t0 + r;
            gr[r] = &g[size_t(r) * hs];
            dar[r] = &da[size_t(r) * Tn];
            dpr[r] = &dp[size_t(r) * Tn];
            dqr[r] = &dq[size_t(t) * hs];
            const T* go = dout + (size_t(b) * Tn + t) * C + head;
#pragma omp simd
            for (int i = 0; i < hs; ++i) gr[r][i] = to_f32(go[i]);
            const T* att_row = att_bh + size_t(t) * Tn;
            float* ar = &a[size_t(r) * Tn];
#pragma omp simd
            for (int t2 = 0; t2 <= t; ++t2) ar[t2] = to_f32(att_row[t2]);
            std::fill_n(dar[r], n_block, 0.0f);
          }
          // da[t2] = dout_t . v_t2 (over i in order), for the keys of the block's last row.
          const float* const* g_rows = gr;
          add_rows(dar, g_rows, count, vt.data(), Tn, hs, n_block);
          // dv_t2 += att_t[t2] * dout_t for the block's rows t that see key t2.
          add_outer(dv.data(), a.data(), Tn, g.data(), t0, count, hs);
          for (int r = 0; r < count; ++r) {
            const int t = t0 + r, n = t + 1;
            const float* ar = &a[size_t(r) * Tn];
            const float* dat = dar[r];
            float* dpt = dpr[r];
            // Softmax backward: dpre = att * (datt - sum(att * datt)).
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int t2 = 0; t2 < n; ++t2) dot += ar[t2] * dat[t2];
#pragma omp simd
            for (int t2 = 0; t2 < n; ++t2) dpt[t2] = ar[t2] * (dat[t2] - dot);
              // score = scale * q_t . k_t2: dq_t += scale dp[t2] k_t2; dk_t2 += scale dp[t2] q_t.
#pragma omp simd
            for (int t2 = 0; t2 < n; ++t2) dpt[t2] *= scale;
          }
          // dq_t over keys 0..t0 for the whole block, then each row's own last keys.
          const float* const* dp_rows = dpr;
          add_rows(dqr, dp_rows, count, k.data(), hs, t0 + 1, hs);
          for (int r = 1; r < count; ++r) {
            add_rows(dqr[r], dpr[r] + t0 + 1, &k[size_t(t0 + 1) * hs], hs, r, hs);
          }
          // dk_t2 += dp_t[t2] * q_t for the block's rows t that see key t2.
          add_outer(dk.data(), dp.data(), Tn, &q[size_t(t0) * hs], t0, count, hs);
        }
        T* dx = dinp + size_t(b) * Tn * C3;
        store_rows(dx, dq.data(), {C3, head}, Tn, hs, acc);
        store_rows(dx, dk.data(), {C3, C + head}, Tn, hs, acc);
        store_rows(dx, dv.data(), {C3, 2 * C + head}, Tn, hs, acc);
      }
    }
  }
}

#define SRKIT_INSTANTIATE(T)                                                                      \
  template void attention_forward<T>(T*, T*, const T*, int, int, int, int);                       \
  template void attention_backward<T>(T*, GradWrite, const T*, const T*, const T*, int, int, int, \
                                      int);
SRKIT_INSTANTIATE(float)
SRKIT_INSTANTIATE(bf16)
#undef SRKIT_INSTANTIATE

}  // namespace srkit::cpu
