// cublasLtMatmul, the subset the CUDA backend calls, against a straightforward
// CPU reference of cuBLASLt's column-major definition: every transpose
// combination, leading dimensions larger than the rows, strided batches,
// alpha/beta (including an in-place C == D), bias and GELU (+aux) epilogues,
// bf16 and fp32. In the CPU emulation the reference is the emulated library's
// stated arithmetic, so results must be equal bit for bit; on a GPU within a
// tolerance. Also: the GEMM is stream-ordered between two kernels. What only the
// emulation checks (unimplemented attributes, alignment) is in
// tests/emu/test_cublaslt_emulation.cu.
#include <cublasLt.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/cuda/compat.cuh"
#include "kernels/cuda/device.h"
#include "kernels/cuda/launch.cuh"

namespace srkit {
namespace {

void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(what) + " failed: status " + std::to_string(int(s)));
  }
}

bool is_bf16(cudaDataType_t t) { return t == CUDA_R_16BF; }

// Host matrix storage of either type, read and written as float.
struct HostBuf {
  cudaDataType_t type;
  std::vector<uint8_t> bytes;
  HostBuf(cudaDataType_t t, size_t n) : type(t), bytes(n * (is_bf16(t) ? 2 : 4)) {}
  size_t size() const { return bytes.size() / (is_bf16(type) ? 2 : 4); }
  float get(size_t i) const {
    if (is_bf16(type)) {
      bf16 h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      return bf16_to_float(h);
    }
    float f;
    std::memcpy(&f, bytes.data() + 4 * i, 4);
    return f;
  }
  void set(size_t i, float x) {
    if (is_bf16(type)) {
      const bf16 h = float_to_bf16_rn(x);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(bytes.data() + 4 * i, &x, 4);
    }
  }
};

// A device copy of a HostBuf.
struct DeviceBuf {
  explicit DeviceBuf(const HostBuf& h) : bytes(h.bytes.size()) {
    ptr = cuda::device_malloc(std::max<size_t>(bytes, 16));
    cuda::copy_to_device(ptr, h.bytes.data(), bytes);
  }
  ~DeviceBuf() { cuda::device_free(ptr); }
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;
  void download(HostBuf* h) const { cuda::copy_to_host(h->bytes.data(), ptr, bytes); }
  void* ptr;
  size_t bytes;
};

void fill(HostBuf* h, uint64_t seed) {
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < h->size(); ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    h->set(i, float(int32_t(s >> 40) % 4096) / 1024.0f);  // [-4, 4), exact in bf16
  }
}

float gelu_tanh(float t) {
  return 0.5f * t * (1.0f + std::tanh(0.7978845608028654f * (t + 0.044715f * t * t * t)));
}

// A column-major matrix of a batch: rows x cols with leading dimension ld.
struct Layout {
  int64_t rows, cols, ld, stride;
  size_t elements(int batch) const {
    return size_t(stride) * size_t(batch - 1) + size_t(ld * cols);
  }
};

struct Case {
  bool ta, tb;
  cudaDataType_t ab, cd;
  int64_t m, n, k;
  int batch;
  float alpha, beta;
  cublasLtEpilogue_t epilogue;
  bool in_place;  // C and D are one buffer
};

bool has_bias(cublasLtEpilogue_t e) { return (e & CUBLASLT_EPILOGUE_BIAS) != 0; }
bool has_gelu(cublasLtEpilogue_t e) { return (e & CUBLASLT_EPILOGUE_GELU) != 0; }
bool has_aux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}

std::string describe(const Case& c) {
  return std::string("op(A) ") + (c.ta ? "T" : "N") + " op(B) " + (c.tb ? "T" : "N") + " AB " +
         (is_bf16(c.ab) ? "bf16" : "f32") + " CD " + (is_bf16(c.cd) ? "bf16" : "f32") + " m" +
         std::to_string(c.m) + " n" + std::to_string(c.n) + " k" + std::to_string(c.k) + " batch " +
         std::to_string(c.batch) + " alpha " + std::to_string(c.alpha) + " beta " +
         std::to_string(c.beta) + " epilogue " + std::to_string(int(c.epilogue)) +
         (c.in_place ? " in place" : "");
}

// Runs one case through cuBLASLt and the reference; compares D (and aux).
void run_case(const Case& c, cublasLtHandle_t lt, cuda::Stream stream) {
  SCOPED_TRACE(describe(c));
  // Leading dimensions above the rows; batches apart with a gap.
  Layout la{c.ta ? c.k : c.m, c.ta ? c.m : c.k, (c.ta ? c.k : c.m) + 3, 0};
  Layout lb{c.tb ? c.n : c.k, c.tb ? c.k : c.n, (c.tb ? c.n : c.k) + 1, 0};
  Layout lc{c.m, c.n, c.m + 5, 0};
  Layout ld = c.in_place ? lc : Layout{c.m, c.n, c.m + 2, 0};
  for (Layout* l : {&la, &lb, &lc, &ld}) l->stride = l->ld * l->cols + 7;
  HostBuf a(c.ab, la.elements(c.batch)), b(c.ab, lb.elements(c.batch));
  HostBuf cm(c.cd, lc.elements(c.batch)), d(c.cd, ld.elements(c.batch));
  HostBuf bias(c.cd, size_t(c.m));
  const int64_t aux_ld = (c.m + 7) / 8 * 8 + 8;  // cuBLASLt wants a multiple of 8
  HostBuf aux(c.cd, size_t(aux_ld * c.n));
  fill(&a, 1);
  fill(&b, 2);
  fill(&cm, 3);
  fill(&d, 4);  // poison: every element of D is overwritten
  fill(&bias, 5);
  fill(&aux, 6);
  DeviceBuf da(a), db(b), dc(cm), dd(d), dbias(bias), daux(aux);
  void* d_ptr = c.in_place ? dc.ptr : dd.ptr;

  cublasLtMatmulDesc_t desc = nullptr;
  check_lt(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  const int32_t opa = c.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = c.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa),
           "TRANSA");
  check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb),
           "TRANSB");
  const uint32_t epi = c.epilogue;
  check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
           "EPILOGUE");
  if (has_bias(c.epilogue)) {
    const void* p = dbias.ptr;
    const int32_t t = c.cd;
    check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p, sizeof p),
             "BIAS_POINTER");
    check_lt(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof t),
        "BIAS_DATA_TYPE");
  }
  if (has_aux(c.epilogue)) {
    void* p = daux.ptr;
    const int32_t t = c.cd;
    check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &p,
                                            sizeof p),
             "EPILOGUE_AUX_POINTER");
    check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                            sizeof aux_ld),
             "EPILOGUE_AUX_LD");
    check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &t,
                                            sizeof t),
             "EPILOGUE_AUX_DATA_TYPE");
  }
  auto make_layout = [&](const Layout& l, cudaDataType_t t) {
    cublasLtMatrixLayout_t h = nullptr;
    check_lt(cublasLtMatrixLayoutCreate(&h, t, uint64_t(l.rows), uint64_t(l.cols), l.ld), "layout");
    if (c.batch > 1) {
      const int32_t count = c.batch;
      check_lt(cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                sizeof count),
               "BATCH_COUNT");
      check_lt(cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &l.stride, sizeof l.stride),
               "STRIDED_BATCH_OFFSET");
    }
    return h;
  };
  cublasLtMatrixLayout_t A = make_layout(la, c.ab), B = make_layout(lb, c.ab);
  cublasLtMatrixLayout_t C = make_layout(lc, c.cd), D = make_layout(ld, c.cd);
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "preference");
  const uint64_t workspace_bytes = uint64_t(4) << 20;
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace_bytes, sizeof workspace_bytes),
           "MAX_WORKSPACE_BYTES");
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  check_lt(cublasLtMatmulAlgoGetHeuristic(lt, desc, A, B, C, D, pref, 1, &heuristic, &found),
           "heuristic");
  ASSERT_EQ(found, 1);
  void* workspace = cuda::device_malloc(workspace_bytes);
  check_lt(cublasLtMatmul(lt, desc, &c.alpha, da.ptr, A, db.ptr, B, &c.beta, dc.ptr, C, d_ptr, D,
                          &heuristic.algo, workspace, workspace_bytes, stream),
           "cublasLtMatmul");
  cuda::stream_synchronize(stream);
  cuda::device_free(workspace);
  for (cublasLtMatrixLayout_t l : {A, B, C, D}) cublasLtMatrixLayoutDestroy(l);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatmulDescDestroy(desc);

  HostBuf got = c.in_place ? cm : d;
  (c.in_place ? dc : dd).download(&got);
  HostBuf got_aux = aux;
  daux.download(&got_aux);
  // Reference: fp32 products added in k order, then alpha, beta C, bias, GELU.
  size_t bad = 0;
  for (int bt = 0; bt < c.batch; ++bt) {
    for (int64_t j = 0; j < c.n; ++j) {
      for (int64_t i = 0; i < c.m; ++i) {
        float acc = 0.0f, mag = 0.0f;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          const float x = a.get(size_t(bt * la.stride + (c.ta ? kk + i * la.ld : i + kk * la.ld)));
          const float y = b.get(size_t(bt * lb.stride + (c.tb ? j + kk * lb.ld : kk + j * lb.ld)));
          acc += x * y;
          mag += std::fabs(x * y);
        }
        float t = c.alpha * acc;
        if (c.beta != 0.0f) t = t + c.beta * cm.get(size_t(bt * lc.stride + i + j * lc.ld));
        if (has_bias(c.epilogue)) t = t + bias.get(size_t(i));
        const float want = has_gelu(c.epilogue) ? gelu_tanh(t) : t;
        const size_t at = size_t(bt * ld.stride + i + j * ld.ld);
        HostBuf ref(c.cd, 1);
        ref.set(0, want);
        const float r = ref.get(0), g = got.get(at);
        // GPU: accumulation order, FMA and the GELU approximation differ; the
        // output rounding is one ulp of its type.
        const float ulp = is_bf16(c.cd) ? 0.0079f : 1.2e-7f;
        const float tol = 2.0f * ulp * std::fabs(r) + 1e-5f * (std::fabs(c.alpha) * mag + 8.0f) +
                          (has_gelu(c.epilogue) ? 2e-3f : 0.0f);
        const bool ok = cuda::emulated() ? std::memcmp(&r, &g, 4) == 0 : std::fabs(r - g) <= tol;
        if (!ok && ++bad <= 5) {
          ADD_FAILURE() << "D batch " << bt << " (" << i << ", " << j << "): got " << g << ", want "
                        << r;
        }
        if (has_aux(c.epilogue)) {
          HostBuf aref(c.cd, 1);
          aref.set(0, t);
          const float ar = aref.get(0), ag = got_aux.get(size_t(i + j * aux_ld));
          const bool aok =
              cuda::emulated() ? std::memcmp(&ar, &ag, 4) == 0 : std::fabs(ar - ag) <= tol + 1e-3f;
          if (!aok && ++bad <= 5) {
            ADD_FAILURE() << "aux (" << i << ", " << j << "): got " << ag << ", want " << ar;
          }
        }
      }
    }
  }
  EXPECT_EQ(bad, 0u);
  // Padding rows and batch gaps of D are left alone.
  if (!c.in_place) {
    for (size_t e = 0; e < d.size(); ++e) {
      const int64_t off = int64_t(e) % ld.stride, row = off % ld.ld, col = off / ld.ld;
      const bool inside = row < c.m && col < c.n;
      const float before = d.get(e), after = got.get(e);
      if (!inside && std::memcmp(&before, &after, 4) != 0) {
        ADD_FAILURE() << "D element " << e << " outside the matrices was written";
        break;
      }
    }
  }
}

using Param = std::tuple<bool, bool, int>;  // transa, transb, types

class CublasLtGpu : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::device_available(&reason)) GTEST_SKIP() << reason;
    check_lt(cublasLtCreate(&lt_), "cublasLtCreate");
    stream_ = cuda::stream_create();
  }
  void TearDown() override {
    if (lt_) cublasLtDestroy(lt_);
    if (stream_) cuda::stream_destroy(stream_);
  }
  cublasLtHandle_t lt_ = nullptr;
  cuda::Stream stream_ = nullptr;
};

// Types: 0 all bf16, 1 all fp32, 2 bf16 A/B with fp32 C/D.
TEST_P(CublasLtGpu, MatchesTheReference) {
  const auto [ta, tb, types] = GetParam();
  const cudaDataType_t ab = types == 1 ? CUDA_R_32F : CUDA_R_16BF;
  const cudaDataType_t cd = types == 0 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasLtEpilogue_t epilogues[] = {
      CUBLASLT_EPILOGUE_DEFAULT,  CUBLASLT_EPILOGUE_BIAS,      CUBLASLT_EPILOGUE_GELU,
      CUBLASLT_EPILOGUE_GELU_AUX, CUBLASLT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_GELU_AUX_BIAS};
  for (cublasLtEpilogue_t e : epilogues) {
    run_case({ta, tb, ab, cd, 37, 29, 45, 1, 1.0f, 0.0f, e, false}, lt_, stream_);
    run_case({ta, tb, ab, cd, 24, 16, 40, 1, 0.75f, -0.5f, e, false}, lt_, stream_);
    if (!has_aux(e)) {
      run_case({ta, tb, ab, cd, 19, 23, 33, 3, -1.25f, 0.5f, e, false}, lt_, stream_);
    }
  }
  run_case({ta, tb, ab, cd, 32, 24, 16, 2, 1.0f, 1.0f, CUBLASLT_EPILOGUE_DEFAULT, true}, lt_,
           stream_);
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const char* types[] = {"bf16", "f32", "bf16_to_f32"};
  return std::string(std::get<0>(info.param) ? "AT" : "AN") +
         (std::get<1>(info.param) ? "_BT_" : "_BN_") + types[std::get<2>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Layouts, CublasLtGpu,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(0, 1, 2)),
                         param_name);

// ---- stream order --------------------------------------------------------------

// One thread spins before it writes: if the GEMM did not wait for this kernel,
// it would read the poison still in x.
__global__ void slow_fill(float* x, int n, float value, int spins) {
  volatile float sink = 0.0f;
  for (int s = 0; s < spins; ++s) sink = sink + 1.0f;
  for (int i = 0; i < n; ++i) x[i] = value + 0.0f * sink;
}

__global__ void copy_out(const float* d, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = d[i];
}

TEST(CublasLtGpuStream, GemmRunsBetweenTheKernelsAroundIt) {
  std::string reason;
  if (!cuda::device_available(&reason)) GTEST_SKIP() << reason;
  cublasLtHandle_t lt = nullptr;
  check_lt(cublasLtCreate(&lt), "cublasLtCreate");
  const cuda::Stream stream = cuda::stream_create();
  const int n = 8;  // D = A B with A 8x8 filled by the kernel, B = identity
  std::vector<float> poison(n * n, -7.0f), eye(n * n, 0.0f);
  for (int i = 0; i < n; ++i) eye[i * n + i] = 1.0f;
  float* a = static_cast<float*>(cuda::device_malloc(n * n * 4));
  float* b = static_cast<float*>(cuda::device_malloc(n * n * 4));
  float* d = static_cast<float*>(cuda::device_malloc(n * n * 4));
  float* out = static_cast<float*>(cuda::device_malloc(n * n * 4));
  cuda::copy_to_device(a, poison.data(), n * n * 4);
  cuda::copy_to_device(b, eye.data(), n * n * 4);
  cuda::copy_to_device(d, poison.data(), n * n * 4);
  cuda::copy_to_device(out, poison.data(), n * n * 4);
  cublasLtMatmulDesc_t desc = nullptr;
  check_lt(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  cublasLtMatrixLayout_t layout = nullptr;
  check_lt(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, n, n, n), "layout");
  const float one = 1.0f, zero = 0.0f;
  cuda::launch(slow_fill, 1, 1, 0, stream, "slow_fill", a, n * n, 3.0f, 20000000);
  check_lt(cublasLtMatmul(lt, desc, &one, a, layout, b, layout, &zero, d, layout, d, layout,
                          nullptr, nullptr, 0, stream),
           "cublasLtMatmul");
  cuda::launch(copy_out, 1, 1, 0, stream, "copy_out", d, out, n * n);
  cuda::stream_synchronize(stream);
  std::vector<float> got(n * n);
  cuda::copy_to_host(got.data(), out, n * n * 4);
  EXPECT_EQ(got, std::vector<float>(n * n, 3.0f));
  for (float* p : {a, b, d, out}) cuda::device_free(p);
  cublasLtMatrixLayoutDestroy(layout);
  cublasLtMatmulDescDestroy(desc);
  cuda::stream_destroy(stream);
  cublasLtDestroy(lt);
}

}  // namespace
}  // namespace srkit
