// The bf16 GEMM on AVX512_BF16 (kernels/cpu/gemm_bf16_dot.h): one VDPBF16PS
// step equals the documented rule (dot_pair_reference) on random normal
// operands; tile_product is, bit for bit, the chain of those steps over k for
// every operand layout, odd K and partial register blocks; and the matmul ops
// on that path are the rounded chain at every GPT-2 shape class, the same for
// any thread count. Also the choice of path (SRKIT_BF16_GEMM). On a CPU
// without AVX512_BF16 the kernel tests skip, saying so.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16_dot.h"
#include "kernels/cpu/gemm_bf16_path.h"
#include "tests/test_ops_util.h"

namespace srkit::cpu {
namespace {

using namespace srkit::testing;

#define SKIP_WITHOUT_AVX512_BF16()                                                 \
  if (!bf16_dot::cpu_supported()) {                                                \
    GTEST_SKIP() << "this CPU has no AVX512_BF16: the sgemm path is the only one"; \
  }

// bf16 values of both signs with exponents in [2^-20, 2^4): products and sums
// of a few thousand stay far from subnormals and overflow.
std::vector<bf16> random_bf16(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<bf16> v(n);
  for (bf16& x : v) {
    const uint32_t r = g();
    const uint32_t exponent = 107 + r % 24, mantissa = (r >> 8) & 0x7f, sign = (r >> 16) & 1;
    x.bits = uint16_t(sign << 15 | exponent << 7 | mantissa);
  }
  return v;
}

// The chain over k of the documented step, for x[k * sx] and y[k * sy].
float chain(const bf16* x, size_t sx, const bf16* y, size_t sy, int K) {
  const bf16 zero{0};
  float c = 0.0f;
  for (int k = 0; k < K; k += 2) {
    const bool pair = k + 1 < K;
    c = bf16_dot::dot_pair_reference(c, x[size_t(k) * sx], pair ? x[size_t(k + 1) * sx] : zero,
                                     y[size_t(k) * sy], pair ? y[size_t(k + 1) * sy] : zero);
  }
  return c;
}

TEST(Bf16Dot, OneStepIsTheDocumentedRule) {
  SKIP_WITHOUT_AVX512_BF16();
  // K = 4: the first pair from zero, the second on a random sum; 20000 trials.
  const int trials = 20000;
  const std::vector<bf16> a = random_bf16(size_t(trials) * 4, 1),
                          b = random_bf16(size_t(trials) * 4, 2);
  std::vector<uint32_t> pa(bf16_dot::packed_words(1, 4)), pb(bf16_dot::packed_words(1, 4));
  for (int t = 0; t < trials; ++t) {
    const bf16* x = &a[size_t(t) * 4];
    const bf16* y = &b[size_t(t) * 4];
    bf16_dot::pack_a(x, 4, false, 1, 4, pa.data());
    bf16_dot::pack_b(y, 1, false, 1, 4, pb.data());
    float got = 0.0f;
    bf16_dot::tile_product(pa.data(), pb.data(), 1, 1, 4, &got, 1);
    const float want = bf16_dot::dot_pair_reference(
        bf16_dot::dot_pair_reference(0.0f, x[0], x[1], y[0], y[1]), x[2], x[3], y[2], y[3]);
    ASSERT_EQ(float_as_bits(got), float_as_bits(want))
        << "trial " << t << ": " << got << " vs " << want;
  }
}

TEST(Bf16Dot, SubnormalsFlushToZero) {
  const bf16 one{0x3f80}, tiny{0x0040};  // 1 and a subnormal bf16
  EXPECT_EQ(bf16_dot::dot_pair_reference(0.0f, tiny, bf16{0}, one, bf16{0}), 0.0f);
  EXPECT_EQ(bf16_dot::dot_pair_reference(1e-39f, bf16{0}, bf16{0}, bf16{0}, bf16{0}), 0.0f);
  SKIP_WITHOUT_AVX512_BF16();
  const bf16 x[2] = {tiny, bf16{0}}, y[2] = {one, bf16{0}};
  uint32_t pa = 0, pb = 0;
  bf16_dot::pack_a(x, 2, false, 1, 2, &pa);
  bf16_dot::pack_b(y, 1, false, 1, 2, &pb);
  float got = 1.0f;
  bf16_dot::tile_product(&pa, &pb, 1, 1, 2, &got, 1);
  EXPECT_EQ(got, 0.0f);
}

// rows x cols x K with A [rows,K] (or [K,rows] transposed) and B [K,cols] (or
// [cols,K]): every element equals the chain, bit for bit.
void expect_tile_is_chain(int rows, int cols, int K, bool trans_a, bool trans_b, uint32_t seed) {
  const std::vector<bf16> a = random_bf16(size_t(rows) * K, seed),
                          b = random_bf16(size_t(K) * cols, seed + 1);
  const size_t lda = trans_a ? rows : K, ldb = trans_b ? K : cols;
  std::vector<uint32_t> pa(bf16_dot::packed_words(rows, K)), pb(bf16_dot::packed_words(cols, K));
  bf16_dot::pack_a(a.data(), lda, trans_a, rows, K, pa.data());
  bf16_dot::pack_b(b.data(), ldb, trans_b, cols, K, pb.data());
  const size_t ldacc = size_t(cols) + 3;  // a row stride wider than the tile
  std::vector<float> acc(size_t(rows) * ldacc, -7.0f);
  bf16_dot::tile_product(pa.data(), pb.data(), rows, cols, K, acc.data(), ldacc);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const bf16* x = trans_a ? &a[size_t(r)] : &a[size_t(r) * lda];
      const bf16* y = trans_b ? &b[size_t(c) * ldb] : &b[size_t(c)];
      const float want = chain(x, trans_a ? lda : 1, y, trans_b ? 1 : ldb, K);
      ASSERT_EQ(float_as_bits(acc[size_t(r) * ldacc + c]), float_as_bits(want))
          << rows << "x" << cols << "x" << K << " trans " << trans_a << trans_b << " at (" << r
          << ", " << c << ")";
    }
    for (size_t c = size_t(cols); c < ldacc; ++c) ASSERT_EQ(acc[size_t(r) * ldacc + c], -7.0f);
  }
}

TEST(Bf16Dot, TileProductIsTheChainForEveryLayoutAndEdge) {
  SKIP_WITHOUT_AVX512_BF16();
  struct Case {
    int rows, cols, K;
  };
  // Full and partial register blocks (12 rows, 16/32 columns), odd K, and K
  // beyond one pass of 512.
  const Case cases[] = {{1, 1, 1},  {12, 32, 64},  {13, 33, 65},   {25, 70, 7},
                        {7, 16, 2}, {24, 17, 300}, {36, 96, 1031}, {5, 40, 1}};
  uint32_t seed = 10;
  for (const Case& c : cases) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) expect_tile_is_chain(c.rows, c.cols, c.K, ta, tb, seed += 2);
    }
  }
}

// The matmul ops on the AVX512_BF16 path: forward RN(chain + bias), backward
// RN(old + chain) for dinp and dweight, at every GPT-2 shape class, with 1
// and with 2 threads.
TEST(Bf16Dot, MatmulOpsAreTheRoundedChainAtEveryShapeClass) {
  SKIP_WITHOUT_AVX512_BF16();
  const ScopedBf16GemmPath path(Bf16GemmPath::kAvx512Bf16);
  uint32_t seed = 500;
  for (const MatmulShape& s : matmul_shape_classes()) {
    const size_t N = s.N, C = s.C, OC = s.OC;
    const std::vector<bf16> inp = random_bf16(N * C, seed += 10),
                            weight = random_bf16(OC * C, seed + 1),
                            bias = random_bf16(OC, seed + 2), dout = random_bf16(N * OC, seed + 3),
                            dinp0 = random_bf16(N * C, seed + 4),
                            dweight0 = random_bf16(OC * C, seed + 5);
    std::vector<uint16_t> first_out, first_dinp, first_dweight;
    for (int threads : {1, 2}) {
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads);
      Workspace ws;
      std::vector<bf16> out(N * OC), dinp = dinp0, dweight = dweight0, dbias(OC, bf16{0});
      matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), s.N, s.C, s.OC, ws);
      matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                      weight.data(), s.N, s.C, s.OC, ws, true, true);
      omp_set_num_threads(saved);
      auto bits = [](const std::vector<bf16>& v) {
        std::vector<uint16_t> b(v.size());
        for (size_t i = 0; i < v.size(); ++i) b[i] = v[i].bits;
        return b;
      };
      if (threads == 2) {
        EXPECT_EQ(bits(out), first_out) << s.name << ": 2 threads vs 1";
        EXPECT_EQ(bits(dinp), first_dinp) << s.name;
        EXPECT_EQ(bits(dweight), first_dweight) << s.name;
        continue;
      }
      first_out = bits(out);
      first_dinp = bits(dinp);
      first_dweight = bits(dweight);
      for (size_t n = 0; n < N; n += 7) {  // a sample of rows keeps the test fast
        for (size_t o = 0; o < OC; ++o) {
          const float sum = chain(&inp[n * C], 1, &weight[o * C], 1, s.C);
          ASSERT_EQ(out[n * OC + o].bits, float_to_bf16_rn(sum + bf16_to_float(bias[o])).bits)
              << s.name << " out (" << n << ", " << o << ")";
        }
        for (size_t c = 0; c < C; ++c) {
          const float sum = chain(&dout[n * OC], 1, &weight[c], C, s.OC);
          ASSERT_EQ(dinp[n * C + c].bits,
                    float_to_bf16_rn(bf16_to_float(dinp0[n * C + c]) + sum).bits)
              << s.name << " dinp (" << n << ", " << c << ")";
        }
      }
      for (size_t o = 0; o < OC; o += 5) {
        for (size_t c = 0; c < C; ++c) {
          const float sum = chain(&dout[o], OC, &inp[c], C, s.N);
          ASSERT_EQ(dweight[o * C + c].bits,
                    float_to_bf16_rn(bf16_to_float(dweight0[o * C + c]) + sum).bits)
              << s.name << " dweight (" << o << ", " << c << ")";
        }
      }
    }
  }
}

TEST(Bf16GemmPath, AutoTakesAvx512Bf16WhereTheCpuHasIt) {
  EXPECT_EQ(parse_bf16_gemm_path(nullptr, true), Bf16GemmPath::kAvx512Bf16);
  EXPECT_EQ(parse_bf16_gemm_path("", false), Bf16GemmPath::kSgemm);
  EXPECT_EQ(parse_bf16_gemm_path("auto", true), Bf16GemmPath::kAvx512Bf16);
  EXPECT_EQ(parse_bf16_gemm_path("auto", false), Bf16GemmPath::kSgemm);
  EXPECT_EQ(parse_bf16_gemm_path("sgemm", true), Bf16GemmPath::kSgemm);
  EXPECT_EQ(parse_bf16_gemm_path("avx512bf16", true), Bf16GemmPath::kAvx512Bf16);
  EXPECT_STREQ(bf16_gemm_path_name(Bf16GemmPath::kSgemm), "sgemm");
  EXPECT_STREQ(bf16_gemm_path_name(Bf16GemmPath::kAvx512Bf16), "avx512bf16");
}

TEST(Bf16GemmPath, BadValuesNameTheVariableAndTheChoices) {
  try {
    parse_bf16_gemm_path("amx", true);
    FAIL() << "no error for SRKIT_BF16_GEMM=amx";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "SRKIT_BF16_GEMM='amx' is not a bf16 GEMM path (expected auto, sgemm or avx512bf16)");
  }
  try {
    parse_bf16_gemm_path("avx512bf16", false);
    FAIL() << "no error for avx512bf16 on a CPU without it";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("this CPU has no AVX512_BF16"), std::string::npos);
  }
}

TEST(Bf16GemmPath, ScopedPathForcesAndRestores) {
  const Bf16GemmPath before = bf16_gemm_path();
  {
    const ScopedBf16GemmPath forced(Bf16GemmPath::kSgemm);
    EXPECT_EQ(bf16_gemm_path(), Bf16GemmPath::kSgemm);
  }
  EXPECT_EQ(bf16_gemm_path(), before);
}

}  // namespace
}  // namespace srkit::cpu
