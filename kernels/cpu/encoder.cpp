// Token + position embedding, forward and backward. The backward reduces over
// positions: dwpe per position over the batch, dwte per distinct token over the
// positions that hold it. Each sum runs in position order in one thread, so the
// result is the same for any thread count; bf16 gradients are rounded once,
// fp32 ones (G = float) not at all.
#include "kernels/cpu/encoder.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace srkit::cpu {
namespace {

void check_shape(const char* op, int B, int Tn, int C) {
  if (B <= 0 || Tn <= 0 || C <= 0) {
    throw std::invalid_argument(std::string(op) + ": bad shape B=" + std::to_string(B) +
                                " T=" + std::to_string(Tn) + " C=" + std::to_string(C) +
                                " (expected all > 0)");
  }
}

// dst = RN(dst + acc)
template <typename G>
void accumulate_row(G* dst, const float* acc, size_t C) {
#pragma omp simd
  for (size_t i = 0; i < C; ++i) dst[i] = from_f32<G>(to_f32(dst[i]) + acc[i]);
}

}  // namespace

template <typename T>
void encoder_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                     int C) {
  check_shape("encoder_forward", B, Tn, C);
  const size_t c = size_t(C);
  const int N = B * Tn;
#pragma omp parallel for schedule(static) if (parallel : size_t(N) * c >= kParallelMinWork)
  for (int p = 0; p < N; ++p) {
    const T* e = wte + size_t(tokens[p]) * c;
    const T* w = wpe + size_t(p % Tn) * c;
    T* o = out + size_t(p) * c;
#pragma omp simd
    for (size_t i = 0; i < c; ++i) o[i] = from_f32<T>(to_f32(e[i]) + to_f32(w[i]));
  }
}

template <typename T, typename G>
void encoder_backward(G* dwte, G* dwpe, const T* dout, const int32_t* tokens, int B, int Tn,
                      int C) {
  check_shape("encoder_backward", B, Tn, C);
  const size_t c = size_t(C);
  const int N = B * Tn;
  // Positions grouped by token, each group in position order (stable sort).
  std::vector<int> order(N);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [tokens](int a, int b) { return tokens[a] < tokens[b]; });
  std::vector<int> group_start;
  for (int i = 0; i < N; ++i) {
    if (i == 0 || tokens[order[i]] != tokens[order[i - 1]]) group_start.push_back(i);
  }
  group_start.push_back(N);
  const int groups = int(group_start.size()) - 1;
#pragma omp parallel if (parallel : size_t(N) * c >= kParallelMinWork)
  {
    std::vector<float> acc(c);
    // dwpe[t] += sum_b dout[b, t]
#pragma omp for schedule(static)
    for (int t = 0; t < Tn; ++t) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int b = 0; b < B; ++b) {
        const T* g = dout + (size_t(b) * Tn + t) * c;
#pragma omp simd
        for (size_t i = 0; i < c; ++i) acc[i] += to_f32(g[i]);
      }
      accumulate_row(dwpe + size_t(t) * c, acc.data(), c);
    }
    // dwte[tok] += sum over the positions holding tok
#pragma omp for schedule(dynamic, 8)
    for (int k = 0; k < groups; ++k) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int j = group_start[k]; j < group_start[k + 1]; ++j) {
        const T* g = dout + size_t(order[j]) * c;
#pragma omp simd
        for (size_t i = 0; i < c; ++i) acc[i] += to_f32(g[i]);
      }
      accumulate_row(dwte + size_t(tokens[order[group_start[k]]]) * c, acc.data(), c);
    }
  }
}

template void encoder_forward<float>(float*, const int32_t*, const float*, const float*, int, int,
                                     int);
template void encoder_forward<bf16>(bf16*, const int32_t*, const bf16*, const bf16*, int, int, int);
#define SRKIT_INSTANTIATE(T, G) \
  template void encoder_backward<T, G>(G*, G*, const T*, const int32_t*, int, int, int);
SRKIT_INSTANTIATE(float, float)
SRKIT_INSTANTIATE(bf16, bf16)
SRKIT_INSTANTIATE(bf16, float)
#undef SRKIT_INSTANTIATE

}  // namespace srkit::cpu
