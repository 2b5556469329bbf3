// Softmax cross-entropy over the first V of Vp logits per row, and the softmax
// of one row for sampling. Padding columns (V..Vp) are never read.
#include "kernels/cpu/loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/common/softmax.h"

namespace srkit::cpu {
namespace {

void check_shape(const char* op, int N, int V, int Vp) {
  if (N <= 0 || V <= 0 || Vp < V) {
    throw std::invalid_argument(std::string(op) + ": bad shape N=" + std::to_string(N) +
                                " V=" + std::to_string(V) + " Vp=" + std::to_string(Vp) +
                                " (expected N > 0 and 0 < V <= Vp)");
  }
}

void check_targets(const char* op, const int32_t* targets, int N, int V) {
  for (int i = 0; i < N; ++i) {
    if (targets[i] >= V) {
      throw std::invalid_argument(std::string(op) + ": target " + std::to_string(targets[i]) +
                                  " at row " + std::to_string(i) + " outside [0, " +
                                  std::to_string(V) + ") (negative means ignore)");
    }
  }
}

// Max and sum of exp(l - max) over l[0..V), in fp32 (a fixed vectorized order).
struct SoftmaxStats {
  float max;
  float sum;
};

template <typename T>
SoftmaxStats softmax_stats(const T* l, int V) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int v = 0; v < V; ++v) mx = std::max(mx, to_f32(l[v]));
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int v = 0; v < V; ++v) sum += softmax_term(to_f32(l[v]), mx);
  return {mx, sum};
}

}  // namespace

template <typename T>
void crossentropy_forward(float* losses, const T* logits, const int32_t* targets, int N, int V,
                          int Vp) {
  check_shape("crossentropy_forward", N, V, Vp);
  check_targets("crossentropy_forward", targets, N, V);
#pragma omp parallel for schedule(static) if (parallel : size_t(N) * V >= kParallelMinWork)
  for (int i = 0; i < N; ++i) {
    const int tgt = targets[i];
    if (tgt < 0) {
      losses[i] = 0.0f;
      continue;
    }
    const T* l = logits + size_t(i) * Vp;
    const SoftmaxStats st = softmax_stats(l, V);
    losses[i] = crossentropy_loss(st.sum, to_f32(l[tgt]), st.max);
  }
}

template <typename T>
void crossentropy_backward(T* dlogits, const T* logits, const int32_t* targets, float dloss, int N,
                           int V, int Vp) {
  check_shape("crossentropy_backward", N, V, Vp);
  check_targets("crossentropy_backward", targets, N, V);
#pragma omp parallel for schedule(static) if (parallel : size_t(N) * V >= kParallelMinWork)
  for (int i = 0; i < N; ++i) {
    const int tgt = targets[i];
    const T* l = logits + size_t(i) * Vp;
    T* d = dlogits + size_t(i) * Vp;
    int written = 0;
    if (tgt >= 0) {
      const SoftmaxStats st = softmax_stats(l, V);
      const float inv = 1.0f / st.sum;
      const float l_tgt = to_f32(l[tgt]);  // read before d (which may alias l) is written
      // Element-wise read-then-write, so d may alias l. The one-hot term is
      // applied after the loop: a per-element select would keep it scalar.
#pragma omp simd
      for (int v = 0; v < V; ++v)
        d[v] = from_f32<T>(softmax_prob(to_f32(l[v]), st.max, inv) * dloss);
      d[tgt] = from_f32<T>((softmax_prob(l_tgt, st.max, inv) - 1.0f) * dloss);
      written = V;
    }
    for (int v = written; v < Vp; ++v) d[v] = T{};
  }
}

template <typename T>
void softmax_row(float* probs, const T* logits, int V) {
  if (V <= 0)
    throw std::invalid_argument("softmax_row: V=" + std::to_string(V) + " (expected > 0)");
  const SoftmaxStats st = softmax_stats(logits, V);
  const float inv = 1.0f / st.sum;
#pragma omp simd
  for (int v = 0; v < V; ++v) probs[v] = softmax_prob(to_f32(logits[v]), st.max, inv);
}

#define SRKIT_INSTANTIATE(T)                                                                  \
  template void crossentropy_forward<T>(float*, const T*, const int32_t*, int, int, int);     \
  template void crossentropy_backward<T>(T*, const T*, const int32_t*, float, int, int, int); \
  template void softmax_row<T>(float*, const T*, int);
SRKIT_INSTANTIATE(float)
SRKIT_INSTANTIATE(bf16)
#undef SRKIT_INSTANTIATE

}  // namespace srkit::cpu
