// Helpers shared by the op tests (tests/test_ops_*.cpp, the GEMM tiling tests
// and the conformance suite): seeded random inputs, bf16 conversions of whole
// vectors, the comparisons they feed, and the GPT-2 matmul shape classes.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/bf16.h"

namespace srkit::testing {

// n values uniform in [lo, hi), fixed by the seed.
inline std::vector<float> random_vec(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The same values rounded to bf16 (and back): inputs both dtypes see exactly.
inline std::vector<float> bf16_representable(std::vector<float> v) {
  for (float& x : v) x = bf16_to_float(float_to_bf16_rn(x));
  return v;
}

inline std::vector<bf16> to_bf16(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = float_to_bf16_rn(v[i]);
  return out;
}

inline std::vector<float> from_bf16(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_float(v[i]);
  return out;
}

// The gradient a backward call accumulated: after - before, element-wise.
inline std::vector<double> accumulated(const std::vector<float>& after,
                                       const std::vector<float>& before) {
  std::vector<double> d(after.size());
  for (size_t j = 0; j < after.size(); ++j) d[j] = double(after[j]) - double(before[j]);
  return d;
}

// |got - want| <= atol + rtol * |want| for every element.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                         double atol, double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t j = 0; j < got.size(); ++j) {
    ASSERT_NEAR(got[j], want[j], atol + rtol * std::fabs(want[j])) << what << " [" << j << "]";
  }
}

inline std::vector<double> to_f64(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// A linear layer's shape: inp [N,C] -> out [N,OC].
struct MatmulShape {
  std::string name;
  int N, C, OC;
};

// The GPT-2 linear layers' shape classes (C->3C, C->C, C->4C, 4C->C, C->Vp) at
// sizes whose tiles (kernels/cpu/gemm_tiles.h) leave partial tiles in both output
// dimensions: N and C not multiples of the tile sides, Vp a multiple of 64 in
// one set and odd in the other. The last shape's dinp reduces over K = Vp =
// 6208, long enough that its tiles shrink to bound the widened panels.
inline std::vector<MatmulShape> matmul_shape_classes() {
  std::vector<MatmulShape> shapes;
  struct Model {
    int N, C, Vp;
  };
  for (const Model& m : {Model{300, 96, 320}, Model{257, 40, 331}}) {
    const std::string at = " N=" + std::to_string(m.N) + " C=" + std::to_string(m.C);
    shapes.push_back({"C->3C" + at, m.N, m.C, 3 * m.C});
    shapes.push_back({"C->C" + at, m.N, m.C, m.C});
    shapes.push_back({"C->4C" + at, m.N, m.C, 4 * m.C});
    shapes.push_back({"4C->C" + at, m.N, 4 * m.C, m.C});
    shapes.push_back({"C->Vp" + at + " Vp=" + std::to_string(m.Vp), m.N, m.C, m.Vp});
  }
  shapes.push_back({"C->Vp N=256 C=256 Vp=6208 (long dinp reduction)", 256, 256, 6208});
  return shapes;
}

}  // namespace srkit::testing
