// The CPU GEMM's tiling (kernels/cpu/gemm_tiles.h, gemm.cpp): at every GPT-2
// shape class, large enough for partial tiles in both dimensions, both dtypes
// and both backward modes agree with an fp64 reference within a stated bound;
// a bf16 result is the rounded fp32 result of the same tiles; overwriting
// ignores NaN gradients; the workspace grows once; the tile geometry is a
// function of the shape alone. The op's semantics on small shapes, for every
// backend, are the conformance suite's (tests/conformance); thread invariance
// is tests/test_ops_threads.cpp.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16_path.h"
#include "kernels/cpu/gemm_tiles.h"
#include "tests/test_ops_util.h"

namespace srkit::cpu {
namespace {

using namespace srkit::testing;

// One matmul's inputs at a shape, bf16-representable so that the fp32 and the
// bf16 ops see the same values; d*0 are the old gradients.
struct MatmulInputs {
  explicit MatmulInputs(const MatmulShape& s, uint64_t seed)
      : shape(s),
        inp(bf16_representable(random_vec(size_t(s.N) * s.C, seed))),
        weight(bf16_representable(random_vec(size_t(s.OC) * s.C, seed + 1))),
        bias(bf16_representable(random_vec(size_t(s.OC), seed + 2))),
        dout(bf16_representable(random_vec(size_t(s.N) * s.OC, seed + 3))),
        dinp0(bf16_representable(random_vec(size_t(s.N) * s.C, seed + 4))),
        dweight0(bf16_representable(random_vec(size_t(s.OC) * s.C, seed + 5))),
        dbias0(bf16_representable(random_vec(size_t(s.OC), seed + 6))) {}
  MatmulShape shape;
  std::vector<float> inp, weight, bias, dout, dinp0, dweight0, dbias0;
};

// What one forward and one backward call produce, for dtype T.
template <typename T>
struct MatmulOutputs {
  std::vector<T> out, dinp, dweight, dbias;
};

template <typename T>
std::vector<T> as(const std::vector<float>& v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return to_bf16(v);
  }
}

// Forward with bias, then backward: accumulating into the old gradients, or
// overwriting gradients that start as NaN (overwrite must not read them).
template <typename T>
MatmulOutputs<T> run_matmul(const MatmulInputs& in, bool accumulate, Workspace& ws) {
  const MatmulShape& s = in.shape;
  MatmulOutputs<T> o;
  o.out.resize(size_t(s.N) * s.OC);
  const std::vector<T> inp = as<T>(in.inp), weight = as<T>(in.weight), bias = as<T>(in.bias),
                       dout = as<T>(in.dout);
  matmul_forward(o.out.data(), inp.data(), weight.data(), bias.data(), s.N, s.C, s.OC, ws);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto start = [&](const std::vector<float>& old) {
    return as<T>(accumulate ? old : std::vector<float>(old.size(), nan));
  };
  o.dinp = start(in.dinp0);
  o.dweight = start(in.dweight0);
  o.dbias = start(in.dbias0);
  matmul_backward(o.dinp.data(), o.dweight.data(), o.dbias.data(), dout.data(), inp.data(),
                  weight.data(), s.N, s.C, s.OC, ws, accumulate, accumulate);
  return o;
}

// An fp64 result with the sum of the magnitudes of its terms (old value
// included), which bounds the fp32 error.
struct Ref {
  std::vector<double> value, mag;
  int K = 0;  // terms in each sum
};

// y[j] += a * x[j] and its magnitude, for j < n: the inner loop of every reference.
void axpy(double a, const float* x, size_t n, double* y, double* mag) {
  for (size_t j = 0; j < n; ++j) {
    y[j] += a * double(x[j]);
    mag[j] += std::fabs(a * double(x[j]));
  }
}

// The four results of a forward (with bias) and a backward call, in fp64; with
// `old`, the backward's old gradients added first.
struct MatmulRefs {
  Ref out, dinp, dweight, dbias;
};

MatmulRefs reference(const MatmulInputs& in, bool with_old) {
  const MatmulShape& s = in.shape;
  const size_t N = s.N, C = s.C, OC = s.OC;
  auto start = [](Ref& r, size_t n, int K, const std::vector<float>* old) {
    r.value.assign(n, 0.0);
    r.mag.assign(n, 0.0);
    r.K = K;
    for (size_t i = 0; old && i < n; ++i) {
      r.value[i] = (*old)[i];
      r.mag[i] = std::fabs((*old)[i]);
    }
  };
  MatmulRefs r;
  start(r.out, N * OC, int(C), nullptr);
  start(r.dinp, N * C, int(OC), with_old ? &in.dinp0 : nullptr);
  start(r.dweight, OC * C, int(N), with_old ? &in.dweight0 : nullptr);
  start(r.dbias, OC, int(N), with_old ? &in.dbias0 : nullptr);
  std::vector<float> weight_t(C * OC);  // [C, OC], so every loop below runs along rows
  for (size_t o = 0; o < OC; ++o) {
    for (size_t c = 0; c < C; ++c) weight_t[c * OC + o] = in.weight[o * C + c];
  }
  for (size_t n = 0; n < N; ++n) {
    axpy(1.0, in.bias.data(), OC, &r.out.value[n * OC], &r.out.mag[n * OC]);
    for (size_t c = 0; c < C; ++c) {
      axpy(in.inp[n * C + c], &weight_t[c * OC], OC, &r.out.value[n * OC], &r.out.mag[n * OC]);
    }
    for (size_t o = 0; o < OC; ++o) {
      const double d = in.dout[n * OC + o];
      axpy(d, &in.weight[o * C], C, &r.dinp.value[n * C], &r.dinp.mag[n * C]);
      axpy(d, &in.inp[n * C], C, &r.dweight.value[o * C], &r.dweight.mag[o * C]);
    }
    axpy(1.0, &in.dout[n * OC], OC, r.dbias.value.data(), r.dbias.mag.data());
  }
  return r;
}

// Stated tolerances. fp32: any order of fp32 additions of K terms, plus the
// bias or old value, errs by at most (K + 1) u x (sum of magnitudes), u = 2^-24
// (K + 2 for margin). bf16: that, plus half a bf16 ulp for the one rounding.
template <typename T>
void expect_near_reference(const std::vector<T>& got, const Ref& ref, const std::string& what) {
  ASSERT_EQ(got.size(), ref.value.size()) << what;
  const double u = std::ldexp(1.0, -24);
  for (size_t i = 0; i < got.size(); ++i) {
    const float g = to_f32(got[i]);
    double tol = double(ref.K + 2) * u * ref.mag[i];
    if constexpr (std::is_same_v<T, bf16>) {
      tol += 0.5 * std::max(bf16_ulp(g), bf16_ulp(float(ref.value[i])));
    }
    ASSERT_LE(std::fabs(double(g) - ref.value[i]), tol)
        << what << " [" << i << "] got " << g << " want " << ref.value[i];
  }
}

TEST(CpuGemmTiles, EveryShapeClassMatchesTheFp64Reference) {
  Workspace ws;
  uint64_t seed = 100;
  for (const MatmulShape& s : matmul_shape_classes()) {
    const MatmulInputs in(s, seed += 10);
    for (bool accumulate : {true, false}) {
      const std::string mode = s.name + (accumulate ? " accumulate " : " overwrite ");
      const MatmulRefs ref = reference(in, accumulate);
      const auto f = run_matmul<float>(in, accumulate, ws);
      expect_near_reference(f.out, ref.out, mode + "fp32 out");
      expect_near_reference(f.dinp, ref.dinp, mode + "fp32 dinp");
      expect_near_reference(f.dweight, ref.dweight, mode + "fp32 dweight");
      expect_near_reference(f.dbias, ref.dbias, mode + "fp32 dbias");
      // The AVX512_BF16 path's chain of pair steps rounds K times too, so the
      // same bound holds for it.
      for (Bf16GemmPath path : runnable_bf16_gemm_paths()) {
        const ScopedBf16GemmPath forced(path);
        const std::string what = mode + "bf16 (" + bf16_gemm_path_name(path) + ") ";
        const auto h = run_matmul<bf16>(in, accumulate, ws);
        expect_near_reference(h.out, ref.out, what + "out");
        expect_near_reference(h.dinp, ref.dinp, what + "dinp");
        expect_near_reference(h.dweight, ref.dweight, what + "dweight");
        expect_near_reference(h.dbias, ref.dbias, what + "dbias");
      }
    }
  }
}

// bf16 bits for RN(x + old) (old null: RN(x)).
std::vector<uint16_t> rounded_bits(const std::vector<float>& x, const std::vector<float>* old) {
  std::vector<uint16_t> b(x.size());
  for (size_t i = 0; i < x.size(); ++i) b[i] = float_to_bf16_rn(old ? (*old)[i] + x[i] : x[i]).bits;
  return b;
}
std::vector<uint16_t> bits_of(const std::vector<bf16>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = v[i].bits;
  return b;
}

// The bf16 ops are the fp32 tiles of the same widened operands, rounded once:
// RN(sum + bias) forward, RN(old + product) accumulating, RN(product)
// overwriting, where the fp32 product is the fp32 op's overwrite result (the
// same BLAS call on the same tile, beta = 0). This is the sgemm path's
// contract; the AVX512_BF16 path's is tests/test_gemm_bf16_dot.cpp.
TEST(CpuGemmTiles, Bf16IsTheRoundedFp32ResultOfTheSameTiles) {
  const ScopedBf16GemmPath forced(Bf16GemmPath::kSgemm);
  Workspace ws;
  uint64_t seed = 200;
  for (const MatmulShape& s : matmul_shape_classes()) {
    const MatmulInputs in(s, seed += 10);
    const auto product = run_matmul<float>(in, false, ws);
    for (bool accumulate : {true, false}) {
      const std::string mode = s.name + (accumulate ? " accumulate" : " overwrite");
      const auto h = run_matmul<bf16>(in, accumulate, ws);
      EXPECT_EQ(bits_of(h.out), rounded_bits(product.out, nullptr)) << mode << " out";
      EXPECT_EQ(bits_of(h.dinp), rounded_bits(product.dinp, accumulate ? &in.dinp0 : nullptr))
          << mode << " dinp";
      EXPECT_EQ(bits_of(h.dweight),
                rounded_bits(product.dweight, accumulate ? &in.dweight0 : nullptr))
          << mode << " dweight";
      EXPECT_EQ(bits_of(h.dbias), rounded_bits(product.dbias, accumulate ? &in.dbias0 : nullptr))
          << mode << " dbias";
    }
  }
}

// Overwriting gives what accumulating into zeros gives (equal values; the old
// contents, NaN here, never leak in).
TEST(CpuGemmTiles, OverwriteEqualsAccumulatingIntoZeros) {
  Workspace ws;
  for (const MatmulShape& s : matmul_shape_classes()) {
    MatmulInputs in(s, 300);
    std::fill(in.dinp0.begin(), in.dinp0.end(), 0.0f);
    std::fill(in.dweight0.begin(), in.dweight0.end(), 0.0f);
    std::fill(in.dbias0.begin(), in.dbias0.end(), 0.0f);
    const auto f1 = run_matmul<float>(in, true, ws), f0 = run_matmul<float>(in, false, ws);
    EXPECT_EQ(f0.dinp, f1.dinp) << s.name;
    EXPECT_EQ(f0.dweight, f1.dweight) << s.name;
    EXPECT_EQ(f0.dbias, f1.dbias) << s.name;
    const auto h1 = run_matmul<bf16>(in, true, ws), h0 = run_matmul<bf16>(in, false, ws);
    EXPECT_EQ(from_bf16(h0.dinp), from_bf16(h1.dinp)) << s.name;
    EXPECT_EQ(from_bf16(h0.dweight), from_bf16(h1.dweight)) << s.name;
    EXPECT_EQ(from_bf16(h0.dbias), from_bf16(h1.dbias)) << s.name;
  }
}

// The workspace reaches its size on the first pass over a model's GEMMs (the
// largest matmul_workspace_floats) and a second pass allocates nothing.
TEST(CpuGemmTiles, Bf16WorkspaceGrowsOnTheFirstPassOnly) {
  const std::vector<MatmulShape> shapes = matmul_shape_classes();
  std::vector<MatmulInputs> inputs;
  size_t want = 0;
  for (const MatmulShape& s : shapes) {
    inputs.emplace_back(s, 400);
    want = std::max(want, matmul_workspace_floats<bf16>(s.N, s.C, s.OC, omp_get_max_threads()));
  }
  Workspace ws;
  for (const MatmulInputs& in : inputs) run_matmul<bf16>(in, true, ws);
  EXPECT_EQ(ws.bytes(), want * sizeof(float));
  float* const slot = ws.floats(0, 1);
  for (const MatmulInputs& in : inputs) run_matmul<bf16>(in, false, ws);
  EXPECT_EQ(ws.peak_bytes(), want * sizeof(float));
  EXPECT_EQ(ws.floats(0, 1), slot);
  EXPECT_EQ(matmul_workspace_floats<float>(300, 96, 288, 2), 0u);  // fp32: the arrays themselves
}

// The tile geometry of kernels/cpu/gemm_tiles.h at GPT-2 124M's shapes (B=8, T=256)
// and at small ones: a function of (M, N, K) alone.
TEST(CpuGemmTiles, TileGeometryKnownAnswers) {
  auto tiles = [](int M, int N, int K, bool widened = true) {
    const GemmTiles t = gemm_tiles(M, N, K, widened);
    return std::vector<int>{t.rows, t.cols};
  };
  EXPECT_EQ(tiles(2048, 2304, 768), (std::vector<int>{512, 256}));  // qkv forward
  EXPECT_EQ(tiles(3072, 768, 2048), (std::vector<int>{512, 256}));  // fc dweight
  // fcproj forward: (512 + 256) x 3072 floats of panels is within 3 x 2^20.
  EXPECT_EQ(tiles(2048, 768, 3072), (std::vector<int>{512, 256}));
  // LM head dinp, K = Vp: bf16 panels shrink to the 128 x 128 floor; fp32
  // operands are not widened, so their tiles keep the full size.
  EXPECT_EQ(tiles(2048, 768, 50304), (std::vector<int>{128, 128}));
  EXPECT_EQ(tiles(2048, 768, 50304, /*widened=*/false), (std::vector<int>{512, 256}));
  // d4 attproj forward at B=2, T=64: 128 x 256 has fewer than 8 tiles of any
  // size above 64 but 64 x 64.
  EXPECT_EQ(tiles(128, 256, 256), (std::vector<int>{64, 64}));
  EXPECT_EQ(tiles(7, 11, 13), (std::vector<int>{7, 11}));  // one tile, the whole product
}

}  // namespace
}  // namespace srkit::cpu
