// sum_squares: the global gradient norm's reduction. Fixed 64K-element chunks,
// each summed in fp64 by one thread, the chunk sums added in chunk order: the
// same bits for any thread count.
#include "kernels/cpu/reduce.h"

#include <vector>

namespace srkit::cpu {

template <typename T>
double sum_squares(const T* x, size_t n) {
  constexpr size_t kChunk = size_t(1) << 16;
  const size_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(chunks);
#pragma omp parallel for schedule(static) if (parallel : n >= kParallelMinWork)
  for (size_t ch = 0; ch < chunks; ++ch) {
    const size_t begin = ch * kChunk;
    const size_t end = begin + kChunk < n ? begin + kChunk : n;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (size_t i = begin; i < end; ++i) {
      const double v = to_f32(x[i]);
      s += v * v;
    }
    partial[ch] = s;
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

template double sum_squares<float>(const float*, size_t);
template double sum_squares<bf16>(const bf16*, size_t);

}  // namespace srkit::cpu
