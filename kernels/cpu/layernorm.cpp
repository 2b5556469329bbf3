// LayerNorm forward/backward. Rows are independent, so they run in parallel; the
// parameter gradients reduce over rows, which runs per column chunk with the rows
// in order, so the sums never depend on the thread count.
#include "kernels/cpu/layernorm.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/common/layernorm.h"

namespace srkit::cpu {
namespace {

void check_shape(const char* op, int N, int C) {
  if (N <= 0 || C <= 0) {
    throw std::invalid_argument(std::string(op) + ": bad shape N=" + std::to_string(N) +
                                " C=" + std::to_string(C) + " (expected both > 0)");
  }
}

}  // namespace

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                       const T* bias, int N, int C) {
  check_shape("layernorm_forward", N, C);
  const size_t c = size_t(C);
#pragma omp parallel for schedule(static) if (parallel : size_t(N) * c >= kParallelMinWork)
  for (int n = 0; n < N; ++n) {
    const T* x = inp + size_t(n) * c;
    T* o = out + size_t(n) * c;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (size_t i = 0; i < c; ++i) sum += to_f32(x[i]);
    const float m = sum / float(C);
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (size_t i = 0; i < c; ++i) {
      const float d = to_f32(x[i]) - m;
      sq += d * d;
    }
    const float s = layernorm_rstd(sq, C);
#pragma omp simd
    for (size_t i = 0; i < c; ++i) {
      const float norm = layernorm_norm(to_f32(x[i]), m, s);
      o[i] = from_f32<T>(layernorm_out(norm, to_f32(weight[i]), to_f32(bias[i])));
    }
    mean[n] = m;
    rstd[n] = s;
  }
}

template <typename T, typename G>
void layernorm_backward(T* dinp, GradWrite dinp_mode, G* dweight, G* dbias, GradWrite param_mode,
                        const T* dout, const T* inp, const T* weight, const float* mean,
                        const float* rstd, int N, int C) {
  check_shape("layernorm_backward", N, C);
  const size_t c = size_t(C);
  const bool acc_dinp = dinp_mode == GradWrite::kAccumulate;
  const bool acc_params = param_mode == GradWrite::kAccumulate;
  // dinp, row by row: with dnorm = weight * dout and norm = (x - mean) * rstd,
  // dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)).
#pragma omp parallel for schedule(static) if (parallel : size_t(N) * c >= kParallelMinWork)
  for (int n = 0; n < N; ++n) {
    const T* x = inp + size_t(n) * c;
    const T* g = dout + size_t(n) * c;
    T* dx = dinp + size_t(n) * c;
    const float m = mean[n], s = rstd[n];
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
#pragma omp simd reduction(+ : dnorm_mean, dnorm_norm_mean)
    for (size_t i = 0; i < c; ++i) {
      const float norm = layernorm_norm(to_f32(x[i]), m, s);
      const float dnorm = layernorm_dnorm(to_f32(weight[i]), to_f32(g[i]));
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= float(C);
    dnorm_norm_mean /= float(C);
#pragma omp simd
    for (size_t i = 0; i < c; ++i) {
      const float norm = layernorm_norm(to_f32(x[i]), m, s);
      const float dnorm = layernorm_dnorm(to_f32(weight[i]), to_f32(g[i]));
      const float d = layernorm_dx(dnorm, dnorm_mean, norm, dnorm_norm_mean, s);
      dx[i] = from_f32<T>(grad_base(dx[i], acc_dinp) + d);
    }
  }
  // dweight += sum_n norm * dout; dbias += sum_n dout: per column chunk, rows in order.
  constexpr size_t kChunk = 64;
  const size_t chunks = (c + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (parallel : size_t(N) * c >= kParallelMinWork)
  for (size_t ch = 0; ch < chunks; ++ch) {
    const size_t c0 = ch * kChunk;
    const size_t w = std::min(kChunk, c - c0);
    float dw[kChunk] = {}, db[kChunk] = {};
    for (int n = 0; n < N; ++n) {
      const T* x = inp + size_t(n) * c + c0;
      const T* g = dout + size_t(n) * c + c0;
      const float m = mean[n], s = rstd[n];
#pragma omp simd
      for (size_t j = 0; j < w; ++j) {
        const float gj = to_f32(g[j]);
        dw[j] += layernorm_norm(to_f32(x[j]), m, s) * gj;
        db[j] += gj;
      }
    }
    for (size_t j = 0; j < w; ++j) {
      dweight[c0 + j] = from_f32<G>(grad_base(dweight[c0 + j], acc_params) + dw[j]);
      dbias[c0 + j] = from_f32<G>(grad_base(dbias[c0 + j], acc_params) + db[j]);
    }
  }
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*,
                                       const float*, int, int);
template void layernorm_forward<bf16>(bf16*, float*, float*, const bf16*, const bf16*, const bf16*,
                                      int, int);
#define SRKIT_INSTANTIATE(T, G)                                                                \
  template void layernorm_backward<T, G>(T*, GradWrite, G*, G*, GradWrite, const T*, const T*, \
                                         const T*, const float*, const float*, int, int);
SRKIT_INSTANTIATE(float, float)
SRKIT_INSTANTIATE(bf16, bf16)
SRKIT_INSTANTIATE(bf16, float)
#undef SRKIT_INSTANTIATE

}  // namespace srkit::cpu
