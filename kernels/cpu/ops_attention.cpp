// Causal self-attention, forward and backward, one (batch, head) per task. Each
// task widens its q, k, v slices into fp32 thread-local buffers laid out so every
// inner loop is a contiguous, vectorizable axpy (k and v transposed where the
// loop runs over key positions); all sums then run in a fixed order.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/math.h"
#include "kernels/cpu/ops.h"

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

// y[j] += sum over r = 0..R-1, in that order, of a[r] * X[r][j] (rows of X at
// stride ld), for j < n. Four rows per pass keep y[j] in a register across four
// updates; the additions still run r = 0, 1, 2, ... so the bits equal those of
// the plain one-row-at-a-time loop.
void add_rows(float* y, const float* a, const float* X, size_t ld, int R, int n) {
  int r = 0;
  for (; r + 4 <= R; r += 4) {
    const float a0 = a[r], a1 = a[r + 1], a2 = a[r + 2], a3 = a[r + 3];
    const float* x0 = X + size_t(r) * ld;
    const float *x1 = x0 + ld, *x2 = x1 + ld, *x3 = x2 + ld;
#pragma omp simd
    for (int j = 0; j < n; ++j)
      y[j] = (((y[j] + a0 * x0[j]) + a1 * x1[j]) + a2 * x2[j]) + a3 * x3[j];
  }
  for (; r < R; ++r) {
    const float ar = a[r];
    const float* xr = X + size_t(r) * ld;
#pragma omp simd
    for (int j = 0; j < n; ++j) y[j] += ar * xr[j];
  }
}

}  // namespace

template <typename T>
void attention_forward(T* out, T* att, const T* inp, int B, int Tn, int C, int NH) {
  check_shape("attention_forward", B, Tn, C, NH);
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(float(hs));
  const size_t C3 = 3 * size_t(C), TT = size_t(Tn) * Tn;
#pragma omp parallel if (parallel : size_t(B) * Tn * Tn * C >= kParallelMinWork)
  {
    std::vector<float> kt(size_t(hs) * Tn), v(size_t(Tn) * hs), q(size_t(Tn) * hs);
    std::vector<float> s(Tn), acc(hs);
#pragma omp for collapse(2) schedule(static)
    for (int b = 0; b < B; ++b) {
      for (int h = 0; h < NH; ++h) {
        const T* x = inp + size_t(b) * Tn * C3;
        const size_t head = size_t(h) * hs;
        load_rows(q.data(), x, {C3, head}, Tn, hs);
        load_transposed(kt.data(), x, {C3, C + head}, Tn, hs);
        load_rows(v.data(), x, {C3, 2 * C + head}, Tn, hs);
        T* att_bh = att + (size_t(b) * NH + h) * TT;
        for (int t = 0; t < Tn; ++t) {
          const int n = t + 1;  // visible keys 0..t
          const float* qt = &q[size_t(t) * hs];
          // s[t2] = q_t . k_t2, accumulated over i in order.
          std::fill_n(s.begin(), n, 0.0f);
          add_rows(s.data(), qt, kt.data(), Tn, hs, n);
          T* att_row = att_bh + size_t(t) * Tn;
          float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
          for (int t2 = 0; t2 < n; ++t2) {
            s[t2] *= scale;
            mx = std::max(mx, s[t2]);
          }
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (int t2 = 0; t2 < n; ++t2) {
            s[t2] = exp_poly(s[t2] - mx);
            sum += s[t2];
          }
          const float inv = 1.0f / sum;
#pragma omp simd
          for (int t2 = 0; t2 < n; ++t2) {
            att_row[t2] = from_f32<T>(s[t2] * inv);
            s[t2] = to_f32(att_row[t2]);  // out uses att exactly as stored
          }
          for (int t2 = n; t2 < Tn; ++t2) att_row[t2] = T{};
          // out_t = sum_t2 att[t2] * v_t2, accumulated over t2 in order.
          std::fill(acc.begin(), acc.end(), 0.0f);
          add_rows(acc.data(), s.data(), v.data(), hs, n, hs);
          T* o = out + (size_t(b) * Tn + t) * C + head;
#pragma omp simd
          for (int i = 0; i < hs; ++i) o[i] = from_f32<T>(acc[i]);
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
  const float scale = 1.0f / std::sqrt(float(hs));
  const size_t C3 = 3 * size_t(C), TT = size_t(Tn) * Tn;
  const size_t THS = size_t(Tn) * hs;
#pragma omp parallel if (parallel : size_t(B) * Tn * Tn * C >= kParallelMinWork)
  {
    std::vector<float> q(THS), k(THS), vt(THS), dq(THS), dk(THS), dv(THS);
    std::vector<float> a(Tn), da(Tn), dp(Tn), g(hs);
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
        for (int t = 0; t < Tn; ++t) {
          const int n = t + 1;
          const T* go = dout + (size_t(b) * Tn + t) * C + head;
#pragma omp simd
          for (int i = 0; i < hs; ++i) g[i] = to_f32(go[i]);
          const T* att_row = att_bh + size_t(t) * Tn;
#pragma omp simd
          for (int t2 = 0; t2 < n; ++t2) a[t2] = to_f32(att_row[t2]);
          // da[t2] = dout_t . v_t2 (over i in order); dv_t2 += att[t2] * dout_t.
          std::fill_n(da.begin(), n, 0.0f);
          add_rows(da.data(), g.data(), vt.data(), Tn, hs, n);
          for (int t2 = 0; t2 < n; ++t2) {
            const float w = a[t2];
            float* dvr = &dv[size_t(t2) * hs];
#pragma omp simd
            for (int i = 0; i < hs; ++i) dvr[i] += w * g[i];
          }
          // Softmax backward: dpre = att * (datt - sum(att * datt)).
          float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
          for (int t2 = 0; t2 < n; ++t2) dot += a[t2] * da[t2];
#pragma omp simd
          for (int t2 = 0; t2 < n; ++t2) dp[t2] = a[t2] * (da[t2] - dot);
            // score = scale * q_t . k_t2: dq_t += scale dp[t2] k_t2; dk_t2 += scale dp[t2] q_t.
#pragma omp simd
          for (int t2 = 0; t2 < n; ++t2) dp[t2] *= scale;
          const float* qt = &q[size_t(t) * hs];
          add_rows(&dq[size_t(t) * hs], dp.data(), k.data(), hs, n, hs);
          for (int t2 = 0; t2 < n; ++t2) {
            const float w = dp[t2];
            float* dkr = &dk[size_t(t2) * hs];
#pragma omp simd
            for (int i = 0; i < hs; ++i) dkr[i] += w * qt[i];
          }
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
