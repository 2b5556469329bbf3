// Every op, both dtypes: the same bits with 1, 2 and 3 OpenMP threads (and as
// many OpenBLAS threads, which the GEMM must not use: it splits the work
// itself). Shapes are large enough that each op really splits its work (above
// kParallelMinWork; several GEMM tiles).
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_tiles.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/loss.h"
#include "kernels/cpu/pointwise.h"
#include "kernels/cpu/reduce.h"
#include "tests/test_ops_util.h"

extern "C" void openblas_set_num_threads(int);
extern "C" int openblas_get_num_threads(void);

namespace srkit::cpu {
namespace {

using namespace srkit::testing;

template <typename T>
std::vector<T> make(const std::vector<float>& v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return to_bf16(v);
  }
}

// The bytes of several arrays, concatenated: one value to compare.
class Bytes {
 public:
  template <typename U>
  Bytes& add(const std::vector<U>& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    bytes_.insert(bytes_.end(), p, p + v.size() * sizeof(U));
    return *this;
  }
  bool operator==(const Bytes& o) const { return bytes_ == o.bytes_; }
  size_t size() const { return bytes_.size(); }

 private:
  std::vector<uint8_t> bytes_;
};

void set_threads(int n) {
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

void expect_thread_invariant(const std::function<Bytes()>& run, const char* op) {
  const int omp0 = omp_get_max_threads(), blas0 = openblas_get_num_threads();
  set_threads(1);
  const Bytes one = run();
  ASSERT_GT(one.size(), 0u);
  for (int n : {2, 3}) {
    set_threads(n);
    EXPECT_TRUE(run() == one) << op << ": " << n << " threads differ from 1";
  }
  omp_set_num_threads(omp0);
  openblas_set_num_threads(blas0);
}

template <typename T>
class OpsThreads : public ::testing::Test {};
using Dtypes = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(OpsThreads, Dtypes);

TYPED_TEST(OpsThreads, Encoder) {
  using T = TypeParam;
  constexpr int B = 4, Tn = 64, C = 160, V = 40;
  std::vector<int32_t> tokens(B * Tn);
  const auto r = random_vec(tokens.size(), 1, 0.0f, float(V));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(r[i]);
  const auto wte = make<T>(random_vec(V * C, 2)), wpe = make<T>(random_vec(Tn * C, 3)),
             dout = make<T>(random_vec(B * Tn * C, 4)), dwte0 = make<T>(random_vec(V * C, 5)),
             dwpe0 = make<T>(random_vec(Tn * C, 6));
  expect_thread_invariant(
      [&] {
        std::vector<T> out(B * Tn * C);
        auto dwte = dwte0, dwpe = dwpe0;
        encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, Tn, C);
        encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, Tn, C);
        return Bytes().add(out).add(dwte).add(dwpe);
      },
      "encoder");
}

TYPED_TEST(OpsThreads, Layernorm) {
  using T = TypeParam;
  constexpr int N = 260, C = 200;
  const auto inp = make<T>(random_vec(N * C, 1, -2.0f, 3.0f)), w = make<T>(random_vec(C, 2)),
             b = make<T>(random_vec(C, 3)), dout = make<T>(random_vec(N * C, 4)),
             dinp0 = make<T>(random_vec(N * C, 5)), dw0 = make<T>(random_vec(C, 6)),
             db0 = make<T>(random_vec(C, 7));
  expect_thread_invariant(
      [&] {
        std::vector<T> out(N * C);
        std::vector<float> mean(N), rstd(N);
        auto dinp = dinp0, dw = dw0, db = db0;
        layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N,
                          C);
        layernorm_backward(dinp.data(), GradWrite::kAccumulate, dw.data(), db.data(),
                           GradWrite::kAccumulate, dout.data(), inp.data(), w.data(), mean.data(),
                           rstd.data(), N, C);
        return Bytes().add(out).add(mean).add(rstd).add(dinp).add(dw).add(db);
      },
      "layernorm");
}

TYPED_TEST(OpsThreads, Matmul) {
  using T = TypeParam;
  constexpr int N = 256, C = 96, OC = 200;
  const auto inp = make<T>(random_vec(N * C, 1)), w = make<T>(random_vec(OC * C, 2)),
             b = make<T>(random_vec(OC, 3)), dout = make<T>(random_vec(N * OC, 4)),
             dinp0 = make<T>(random_vec(N * C, 5)), dw0 = make<T>(random_vec(OC * C, 6)),
             db0 = make<T>(random_vec(OC, 7));
  Workspace ws;
  expect_thread_invariant(
      [&] {
        std::vector<T> out(N * OC);
        auto dinp = dinp0, dw = dw0, db = db0;
        matmul_forward(out.data(), inp.data(), w.data(), b.data(), N, C, OC, ws);
        matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C,
                        OC, ws);
        return Bytes().add(out).add(dinp).add(dw).add(db);
      },
      "matmul");
}

// The tiled GEMM at every GPT-2 shape class (partial tiles, long reductions),
// forward and backward, accumulating and overwriting.
TYPED_TEST(OpsThreads, MatmulEveryShapeClassBothBackwardModes) {
  using T = TypeParam;
  Workspace ws;
  uint64_t seed = 10;
  for (const MatmulShape& s : matmul_shape_classes()) {
    const size_t N = s.N, C = s.C, OC = s.OC;
    const auto inp = make<T>(random_vec(N * C, ++seed)), w = make<T>(random_vec(OC * C, ++seed)),
               b = make<T>(random_vec(OC, ++seed)), dout = make<T>(random_vec(N * OC, ++seed)),
               dinp0 = make<T>(random_vec(N * C, ++seed)),
               dw0 = make<T>(random_vec(OC * C, ++seed)), db0 = make<T>(random_vec(OC, ++seed));
    for (bool accumulate : {true, false}) {
      const std::string what = "matmul " + s.name + (accumulate ? " accumulate" : " overwrite");
      expect_thread_invariant(
          [&] {
            std::vector<T> out(N * OC);
            auto dinp = dinp0, dw = dw0, db = db0;
            matmul_forward(out.data(), inp.data(), w.data(), b.data(), s.N, s.C, s.OC, ws);
            matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(),
                            s.N, s.C, s.OC, ws, accumulate, accumulate);
            return Bytes().add(out).add(dinp).add(dw).add(db);
          },
          what.c_str());
    }
  }
}

// What the tiled GEMM relies on: OpenBLAS (pthreads build) set to one thread
// may be called from several threads at once, each call giving the bits it
// gives alone.
TEST(OpsThreadsBlas, ConcurrentSingleThreadedCallsMatchSerialOnes) {
  constexpr int kCalls = 24, M = 96, N = 80, K = 300;
  std::vector<std::vector<float>> a(kCalls), b(kCalls), serial(kCalls), concurrent(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    a[i] = random_vec(size_t(M) * K, 2 * i + 1);
    b[i] = random_vec(size_t(K) * N, 2 * i + 2);
    serial[i].assign(size_t(M) * N, 0.0f);
    concurrent[i].assign(size_t(M) * N, 0.0f);
  }
  const int blas0 = openblas_get_num_threads();
  openblas_set_num_threads(1);
  for (int i = 0; i < kCalls; ++i) {
    sgemm(false, false, M, N, K, a[i].data(), K, b[i].data(), N, 0.0f, serial[i].data(), N);
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(3)
  for (int i = 0; i < kCalls; ++i) {
    sgemm(false, false, M, N, K, a[i].data(), K, b[i].data(), N, 0.0f, concurrent[i].data(), N);
  }
  openblas_set_num_threads(blas0);
  for (int i = 0; i < kCalls; ++i) EXPECT_EQ(concurrent[i], serial[i]) << "call " << i;
}

// The tiles own the threads: a matmul called from inside a parallel region
// (where every caller would share one thread's scratch panels) refuses.
TEST(OpsThreadsBlas, MatmulInsideAParallelRegionThrows) {
  const std::vector<float> x(64 * 64, 1.0f);
  int refused = 0, team = 0;
#pragma omp parallel num_threads(2) reduction(+ : refused)
  {
#pragma omp single
    team = omp_get_num_threads();
    Workspace ws;
    std::vector<float> out(64 * 64);
    try {
      matmul_forward(out.data(), x.data(), x.data(), static_cast<const float*>(nullptr), 64, 64, 64,
                     ws);
    } catch (const std::logic_error&) {
      refused += 1;
    }
  }
  ASSERT_EQ(team, 2) << "the region needs two threads to be active";
  EXPECT_EQ(refused, 2);
}

TYPED_TEST(OpsThreads, Attention) {
  using T = TypeParam;
  constexpr int B = 2, Tn = 64, C = 64, NH = 4;
  const size_t nin = size_t(B) * Tn * 3 * C, nout = size_t(B) * Tn * C,
               natt = size_t(B) * NH * Tn * Tn;
  const auto inp = make<T>(random_vec(nin, 1, -2.0f, 2.0f)), dout = make<T>(random_vec(nout, 2)),
             dinp0 = make<T>(random_vec(nin, 3));
  expect_thread_invariant(
      [&] {
        std::vector<T> out(nout), att(natt);
        auto dinp = dinp0;
        attention_forward(out.data(), att.data(), inp.data(), B, Tn, C, NH);
        attention_backward(dinp.data(), GradWrite::kAccumulate, dout.data(), inp.data(), att.data(),
                           B, Tn, C, NH);
        return Bytes().add(out).add(att).add(dinp);
      },
      "attention");
}

TYPED_TEST(OpsThreads, Pointwise) {
  using T = TypeParam;
  constexpr size_t n = 100003;
  const auto x = make<T>(random_vec(n, 1, -5.0f, 5.0f)), y = make<T>(random_vec(n, 2)),
             g = make<T>(random_vec(n, 3)), d0 = make<T>(random_vec(n, 4));
  expect_thread_invariant(
      [&] {
        std::vector<T> gelu(n), res(n);
        auto dgelu = d0;
        gelu_forward(gelu.data(), x.data(), n);
        gelu_backward(dgelu.data(), GradWrite::kAccumulate, x.data(), g.data(), n);
        residual_forward(res.data(), x.data(), y.data(), n);
        return Bytes().add(gelu).add(dgelu).add(res);
      },
      "gelu/residual");
}

TYPED_TEST(OpsThreads, CrossEntropyAndSoftmax) {
  using T = TypeParam;
  constexpr int N = 64, V = 1000, Vp = 1024;
  const auto logits = make<T>(random_vec(size_t(N) * Vp, 1, -4.0f, 4.0f));
  std::vector<int32_t> targets(N);
  for (int i = 0; i < N; ++i) targets[i] = i % 7 == 3 ? -1 : (i * 37) % V;
  expect_thread_invariant(
      [&] {
        std::vector<float> losses(N), probs(V);
        std::vector<T> dlogits(logits.size());
        crossentropy_forward(losses.data(), logits.data(), targets.data(), N, V, Vp);
        crossentropy_backward(dlogits.data(), logits.data(), targets.data(), 1.0f / N, N, V, Vp);
        softmax_row(probs.data(), logits.data(), V);
        return Bytes().add(losses).add(dlogits).add(probs);
      },
      "crossentropy/softmax_row");
}

TYPED_TEST(OpsThreads, SumSquares) {
  using T = TypeParam;
  const auto x = make<T>(random_vec(5 * 65536 + 7, 1));
  expect_thread_invariant(
      [&] {
        const std::vector<double> s = {sum_squares(x.data(), x.size())};
        return Bytes().add(s);
      },
      "sum_squares");
}

}  // namespace
}  // namespace srkit::cpu
