#include "kernels/cuda/emu/matmul_cpu.h"

#include <algorithm>
#include <cmath>
#include <execution>
#include <numeric>
#include <vector>

#include "kernels/common/bf16.h"

namespace srkit::cuda::emu {
namespace {

float load(const void* base, ElemType t, int64_t i) {
  return t == ElemType::kF32 ? static_cast<const float*>(base)[i]
                             : bf16_to_float(static_cast<const bf16*>(base)[i]);
}

void store(void* base, ElemType t, int64_t i, float x) {
  if (t == ElemType::kF32) {
    static_cast<float*>(base)[i] = x;
  } else {
    static_cast<bf16*>(base)[i] = float_to_bf16_rn(x);
  }
}

const void* batch_base(const MatrixRef& r, int64_t b) {
  const int64_t bytes = r.type == ElemType::kF32 ? 4 : 2;
  return static_cast<const char*>(r.data) + b * r.batch_stride * bytes;
}

float gelu_tanh(float t) {
  const float u = 0.7978845608028654f * (t + 0.044715f * t * t * t);
  return 0.5f * t * (1.0f + std::tanh(u));
}

}  // namespace

void matmul_cpu(const MatmulProblem& p) {
  // op(A) row by row and op(B) column by column, widened to fp32 and contiguous
  // in k, so the dot products stream; the sum still runs in k order.
  std::vector<float> a_rows(size_t(p.m * p.k));
  std::vector<int64_t> cols(size_t(p.n));
  std::iota(cols.begin(), cols.end(), int64_t(0));
  const size_t d_bytes = p.d_type == ElemType::kF32 ? 4 : 2;
  for (int64_t b = 0; b < p.batch; ++b) {
    const void* a = batch_base(p.a, b);
    const void* bm = batch_base(p.b, b);
    const void* c = p.beta != 0.0f ? batch_base(p.c, b) : nullptr;
    void* d = static_cast<char*>(p.d) + b * p.d_batch_stride * int64_t(d_bytes);
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t kk = 0; kk < p.k; ++kk) {
        const int64_t at = p.trans_a ? kk + i * p.a.ld : i + kk * p.a.ld;
        a_rows[size_t(i * p.k + kk)] = load(a, p.a.type, at);
      }
    }
    std::for_each(std::execution::par, cols.begin(), cols.end(), [&](int64_t j) {
      std::vector<float> b_col(size_t(p.k));
      for (int64_t kk = 0; kk < p.k; ++kk) {
        b_col[size_t(kk)] = load(bm, p.b.type, p.trans_b ? j + kk * p.b.ld : kk + j * p.b.ld);
      }
      for (int64_t i = 0; i < p.m; ++i) {
        const float* row = a_rows.data() + i * p.k;
        float acc = 0.0f;
        for (int64_t kk = 0; kk < p.k; ++kk) acc += row[kk] * b_col[size_t(kk)];
        float t = p.alpha * acc;
        if (c) t = t + p.beta * load(c, p.c.type, i + j * p.c.ld);
        if (p.bias) t = t + load(p.bias, p.bias_type, i);
        if (p.aux) store(p.aux, p.aux_type, i + j * p.aux_ld, t);
        store(d, p.d_type, i + j * p.ldd, p.gelu ? gelu_tanh(t) : t);
      }
    });
  }
}

}  // namespace srkit::cuda::emu
