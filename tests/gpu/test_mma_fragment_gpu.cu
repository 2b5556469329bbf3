// The warp-level bf16 fragments of kernels/cuda/mma_fragment.cuh (shape
// m16n8k16, fp32 accumulation) against a reference GEMM, on a GPU and in the CPU
// emulation: every load (A row-major and transposed, B as [n][k] and [k][n]),
// the product, the store, and the accumulator-to-A conversion attention uses.
// Inputs are small integers, so every product and sum is exact in fp32 and any
// order of accumulation (the tensor core's is unspecified) gives the same bits:
// the results must equal the reference exactly, and a wrong element shows.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/compat.cuh"
#include "kernels/cuda/device.h"
#include "kernels/cuda/launch.cuh"
#include "tests/gpu/device_vector.h"
#include "tests/gpu/mma_gemm_kernel.cuh"

namespace srkit {
namespace {

class MmaFragmentGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::device_available(&reason)) GTEST_SKIP() << reason;
  }
};

// Integers in -3..3 (exact in bf16), from a fixed seed.
std::vector<float> small_ints(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = float(int((s >> 33) % 7) - 3);
  }
  return v;
}

std::vector<float> reference_gemm(const std::vector<float>& a, const std::vector<float>& b, int m,
                                  int n, int k) {
  std::vector<float> c(size_t(m) * n, 0.0f);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float s = 0.0f;
      for (int kk = 0; kk < k; ++kk) s += a[size_t(i) * k + kk] * b[size_t(kk) * n + j];
      c[size_t(i) * n + j] = s;
    }
  return c;
}

template <bool kATrans, bool kBTrans>
void check_gemm(int m, int n, int k) {
  const std::vector<float> a = small_ints(size_t(m) * k, 1), b = small_ints(size_t(k) * n, 2);
  test::DeviceVector<float> da(a), db(b), dc(std::vector<float>(size_t(m) * n, -1.0f));
  const dim3 grid(unsigned(n / (8 * test::kMmaWarps)), unsigned(m / 16));
  cuda::launch(test::mma_gemm<kATrans, kBTrans>, grid, dim3(32 * test::kMmaWarps), 0, nullptr,
               "mma_gemm", da.p, db.p, dc.p, n, k);
  const std::vector<float> got = dc.host(), want = reference_gemm(a, b, m, n, k);
  int wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) wrong += got[i] != want[i];
  EXPECT_EQ(wrong, 0) << "of " << want.size() << " elements, A transposed " << kATrans
                      << ", B as [k][n] " << kBTrans;
}

TEST_F(MmaFragmentGpu, LoadAAndLoadBMatchTheReferenceGemm) { check_gemm<false, false>(48, 32, 64); }
TEST_F(MmaFragmentGpu, LoadATransMatchesTheReferenceGemm) { check_gemm<true, false>(32, 16, 48); }
TEST_F(MmaFragmentGpu, LoadBTransMatchesTheReferenceGemm) { check_gemm<false, true>(32, 48, 32); }
TEST_F(MmaFragmentGpu, BothTransposedMatchTheReferenceGemm) { check_gemm<true, true>(16, 16, 80); }

TEST_F(MmaFragmentGpu, AccumulatorToAFragmentChainsTwoProducts) {
  const int w = test::kMmaWarps;
  const std::vector<float> a = small_ints(16 * 16, 3), b = small_ints(size_t(16) * 16 * w, 4),
                           b2 = small_ints(size_t(16) * 8 * w, 5);
  test::DeviceVector<float> da(a), db(b), db2(b2),
      dc(std::vector<float>(size_t(16) * 8 * w, -1.0f));
  cuda::launch(test::mma_chain, 1, 32 * w, 0, nullptr, "mma_chain", da.p, db.p, db2.p, dc.p);
  const std::vector<float> got = dc.host();
  const std::vector<float> s = reference_gemm(a, b, 16, 16 * w, 16);  // |s| <= 144: exact in bf16
  int wrong = 0;
  for (int warp = 0; warp < w; ++warp)
    for (int r = 0; r < 16; ++r)
      for (int nn = 0; nn < 8; ++nn) {
        float want = 0.0f;
        for (int j = 0; j < 16; ++j)
          want += s[size_t(r) * 16 * w + 16 * warp + j] * b2[size_t(j) * 8 * w + 8 * warp + nn];
        wrong += got[size_t(r) * 8 * w + 8 * warp + nn] != want;
      }
  EXPECT_EQ(wrong, 0);
}

TEST(MmaFragmentLayout, EveryElementOfEachFragmentHasOneOwner) {
  // The layout functions cover each tile exactly once over the 32 lanes.
  std::vector<int> a(256, 0), b(128, 0), c(128, 0);
  for (int lane = 0; lane < 32; ++lane) {
    for (int e = 0; e < 8; ++e)
      ++a[size_t(cuda::mma::a_row(lane, e) * 16 + cuda::mma::a_col(lane, e))];
    for (int e = 0; e < 4; ++e) {
      ++b[size_t(cuda::mma::b_row(lane, e) * 8 + cuda::mma::b_col(lane, e))];
      ++c[size_t(cuda::mma::c_row(lane, e) * 8 + cuda::mma::c_col(lane, e))];
    }
  }
  for (int v : a) EXPECT_EQ(v, 1);
  for (int v : b) EXPECT_EQ(v, 1);
  for (int v : c) EXPECT_EQ(v, 1);
}

}  // namespace
}  // namespace srkit
