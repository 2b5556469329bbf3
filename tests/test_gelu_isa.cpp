// The CPU GELU ops (kernels/cpu/pointwise.cpp) on every instruction set the
// CPU runs (AVX2, and AVX-512 where present): each stored element equals the
// element functions of kernels/common/math.h applied one at a time, bit for bit,
// in fp32 and bf16, in both gradient write modes, on lengths with vector tails,
// lengths split over threads, and special values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/common/math.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/pointwise.h"

namespace srkit::cpu {
namespace {

// Lengths around the vector widths, and one above kParallelMinWork so the
// threads split it.
const size_t kLengths[] = {0, 1, 7, 15, 16, 17, 33, 1000, kParallelMinWork + 77};

// Normal values of activation size, then NaN, +-Inf, zeros, denormals and
// magnitudes where the exp clamps and the cube overflows.
template <typename T>
std::vector<T> inputs(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            0.0f,
                            -0.0f,
                            1e-40f,
                            -1e-40f,
                            60.0f,
                            -60.0f,
                            1e13f,
                            -1e13f,
                            3e38f};
  std::vector<T> x(n);
  for (size_t i = 0; i < n; ++i) {
    const float v = i % 97 < std::size(specials) ? specials[i % 97] : normal(rng);
    x[i] = from_f32<T>(v);
  }
  return x;
}

// The same bits, except that any NaN matches any NaN: when both operands of an
// add are NaN, which one's sign and payload survive depends on the operand
// order the compiler picked (x86 keeps the first), so it may differ between
// the op's vector loop and the test's own scalar code (it did in the ASan build).
template <typename T>
bool same_bits(const T& a, const T& b) {
  if (std::isnan(to_f32(a)) && std::isnan(to_f32(b))) return true;
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <typename T>
void check_forward() {
  for (CpuIsa isa : runnable_cpu_isas()) {
    const ScopedCpuIsa forced(isa);
    SCOPED_TRACE(cpu_isa_name(isa));
    for (size_t n : kLengths) {
      const std::vector<T> x = inputs<T>(n, uint32_t(n) + 1);
      std::vector<T> y(n);
      gelu_forward(y.data(), x.data(), n);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(same_bits(y[i], from_f32<T>(gelu(to_f32(x[i]))))) << "n " << n << " i " << i;
      }
    }
  }
}

template <typename T>
void check_backward() {
  for (CpuIsa isa : runnable_cpu_isas()) {
    const ScopedCpuIsa forced(isa);
    SCOPED_TRACE(cpu_isa_name(isa));
    for (GradWrite mode : {GradWrite::kOverwrite, GradWrite::kAccumulate}) {
      for (size_t n : kLengths) {
        const std::vector<T> x = inputs<T>(n, uint32_t(n) + 2);
        const std::vector<T> dout = inputs<T>(n, uint32_t(n) + 3);
        const std::vector<T> before = inputs<T>(n, uint32_t(n) + 4);
        std::vector<T> dinp = before;
        gelu_backward(dinp.data(), mode, x.data(), dout.data(), n);
        const bool acc = mode == GradWrite::kAccumulate;
        for (size_t i = 0; i < n; ++i) {
          const float d = gelu_grad(to_f32(x[i])) * to_f32(dout[i]);
          const T want = from_f32<T>(grad_base(before[i], acc) + d);
          ASSERT_TRUE(same_bits(dinp[i], want)) << "accumulate " << acc << " n " << n << " i " << i;
        }
      }
    }
  }
}

TEST(GeluIsa, ForwardF32EqualsTheElementFunction) { check_forward<float>(); }
TEST(GeluIsa, ForwardBf16EqualsTheElementFunction) { check_forward<bf16>(); }
TEST(GeluIsa, BackwardF32EqualsTheElementFunction) { check_backward<float>(); }
TEST(GeluIsa, BackwardBf16EqualsTheElementFunction) { check_backward<bf16>(); }

}  // namespace
}  // namespace srkit::cpu
