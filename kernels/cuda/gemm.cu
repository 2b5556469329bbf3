// Gemm (kernels/cuda/gemm.h) over cuBLASLt, and the bias broadcast kernel it
// needs; the bias gradient is column_sums (kernels/cuda/column_sums.cu).
//
// Layout mapping. The project's matrices are row-major; cuBLASLt's are
// column-major. A row-major [R,C] matrix with row stride ld is, read as is, the
// column-major [C,R] matrix with leading dimension ld: its transpose. So the
// row-major product D = op(A) op(B) is computed as the column-major product
// D^T = op(B)^T op(A)^T, cuBLASLt's "A" being the caller's B and its "B" the
// caller's A, with no data moved:
//   forward   out[N,OC] = inp @ W^T       as  out^T[OC,N]  = (W as [C,OC])^T  (inp as [C,N])
//   backward  dinp[N,C] = dout @ W        as  dinp^T[C,N]  = (W as [C,OC])    (dout as [OC,N])
//             dW[OC,C]  = dout^T @ inp    as  dW^T[C,OC]   = (inp as [C,N])   (dout as [OC,N])^T
// The bias runs along cuBLASLt's rows (m = OC), which is what its BIAS epilogue
// adds: one rounding of alpha * sum + bias (+ beta * old) to the output type.
//
// Every problem (shape, transposes, leading dimensions, batch strides, types,
// epilogue, and the alignment of each pointer) gets its descriptor, layouts and
// the heuristic's algorithm once, cached in a hash map; later calls only set
// the bias pointer and enqueue. cuBLASLt assumes 256-byte aligned matrices
// unless told less, and slices of larger buffers (one layer's activations) may
// be less aligned, so the alignment of each pointer (capped at 256) is both
// part of the key and the preference the algorithm is chosen with.
#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/elements.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/scratch_sizes.h"

namespace srkit::cuda {
namespace {

// Hopper's recommended cuBLASLt workspace; allocated once per Gemm.
constexpr size_t kWorkspaceBytes = kGemmWorkspaceBytes;
// No preference covers the bias pointer, and the epilogue kernels load it in
// 16-byte vectors: a less aligned bias goes through the broadcast path.
constexpr uint32_t kBiasAlignment = 16;

void check_lt(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cuBLASLt ") + what +
                             " failed: " + cublasLtGetStatusName(status));
  }
}

cudaDataType_t lt_type(DType t) { return t == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF; }

// The largest power of two (at most 256) dividing the address.
uint32_t pointer_alignment(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

void check_matmul_shape(const char* op, int N, int C, int OC) {
  if (N <= 0 || C <= 0 || OC <= 0) {
    throw std::invalid_argument(std::string(op) + ": bad shape N=" + std::to_string(N) +
                                " C=" + std::to_string(C) + " OC=" + std::to_string(OC) +
                                " (expected all > 0)");
  }
}

// One GEMM in cuBLASLt's column-major terms:
//   D[m,n] (batch of them) = alpha op(A) op(B) + beta D (+ bias[m])
// with op(A) m x k, op(B) k x n. Every field is part of the cache key.
struct LtProblem {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;
  int32_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  DType ab = DType::kF32, d = DType::kF32;
  bool bias = false;  // BIAS epilogue, bias in d's type
  uint32_t align_a = 256, align_b = 256, align_d = 256;

  using Key = std::array<int64_t, 18>;
  Key key() const {
    // clang-format off
    return {trans_a, trans_b, m, n, k, lda, ldb, ldd, batch, stride_a, stride_b, stride_d,
            int64_t(ab), int64_t(d), bias, align_a, align_b, align_d};
    // clang-format on
  }
  std::string describe() const {
    return std::string("m=") + std::to_string(m) + " n=" + std::to_string(n) +
           " k=" + std::to_string(k) + (trans_a ? " A^T" : " A") + (trans_b ? " B^T" : " B") +
           " batch=" + std::to_string(batch) + " AB " + dtype_name(ab) + " D " + dtype_name(d) +
           (bias ? " +bias" : "");
  }
};

struct KeyHash {
  size_t operator()(const LtProblem::Key& key) const {
    uint64_t h = 0xcbf29ce484222325ull;  // a multiply-xor mix of the fields
    for (const int64_t v : key) {
      h ^= uint64_t(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      h *= 0x100000001b3ull;
    }
    return size_t(h);
  }
};

// What a problem needs at every call: its descriptor (bias pointer set per
// call), the layouts of A, B and D (C shares D's), and the algorithm.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    for (cublasLtMatrixLayout_t l : {a, b, d}) {
      if (l) cublasLtMatrixLayoutDestroy(l);
    }
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

cublasLtMatrixLayout_t make_layout(DType t, int64_t rows, int64_t cols, int64_t ld, int32_t batch,
                                   int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  check_lt(cublasLtMatrixLayoutCreate(&layout, lt_type(t), uint64_t(rows), uint64_t(cols), ld),
           "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    check_lt(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                              sizeof batch),
             "CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT");
    check_lt(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                              &stride, sizeof stride),
             "CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET");
  }
  return layout;
}

// ---- kernels -------------------------------------------------------------------

constexpr int kThreads = 256;

// out[n, oc] = bias[oc]: the C matrix of a beta = 1 GEMM, for a bias too
// little aligned for the epilogue. Grid-stride, consecutive threads on
// consecutive elements of a row.
template <typename T>
__global__ void broadcast_rows(T* __restrict__ out, const T* __restrict__ bias, size_t N,
                               size_t OC) {
  const size_t total = N * OC;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    out[i] = bias[i % OC];
  }
}

unsigned grid_for(size_t items) {
  return unsigned(std::min<size_t>(8192, (items + kThreads - 1) / kThreads));
}

}  // namespace

struct Gemm::Impl {
  Stream stream = nullptr;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::unordered_map<LtProblem::Key, std::unique_ptr<Plan>, KeyHash> plans;

  // bias: this call's (the heuristic sees a complete descriptor).
  const Plan& plan_for(const LtProblem& p, const void* bias) {
    const LtProblem::Key key = p.key();
    const auto found = plans.find(key);
    if (found != plans.end()) return *found->second;
    auto plan = std::make_unique<Plan>();
    check_lt(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
             "cublasLtMatmulDescCreate");
    const int32_t op_a = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int32_t op_b = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    check_lt(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a),
        "CUBLASLT_MATMUL_DESC_TRANSA");
    check_lt(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b),
        "CUBLASLT_MATMUL_DESC_TRANSB");
    if (p.bias) {
      const uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      check_lt(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                              sizeof epilogue),
               "CUBLASLT_MATMUL_DESC_EPILOGUE");
      const int32_t bias_type = lt_type(p.d);
      check_lt(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                              &bias_type, sizeof bias_type),
               "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE");
      set_bias(*plan, bias);
    }
    plan->a =
        make_layout(p.ab, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k, p.lda, p.batch, p.stride_a);
    plan->b =
        make_layout(p.ab, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n, p.ldb, p.batch, p.stride_b);
    plan->d = make_layout(p.d, p.m, p.n, p.ldd, p.batch, p.stride_d);

    cublasLtMatmulPreference_t pref = nullptr;
    check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t max_workspace = kWorkspaceBytes;
    // C is D (same pointer) in every call.
    const uint32_t align[4] = {p.align_a, p.align_b, p.align_d, p.align_d};
    const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof max_workspace);
    for (int i = 0; i < 4 && status == CUBLAS_STATUS_SUCCESS; ++i) {
      status =
          cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &align[i], sizeof align[i]);
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found_count = 0;
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a, plan->b, plan->d,
                                              plan->d, pref, 1, &result, &found_count);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    check_lt(status, "cublasLtMatmulAlgoGetHeuristic");
    if (found_count < 1) {
      throw std::runtime_error("cuBLASLt: no algorithm for the GEMM " + p.describe());
    }
    plan->algo = result.algo;
    return *plans.emplace(key, std::move(plan)).first->second;
  }

  static void set_bias(const Plan& plan, const void* bias) {
    check_lt(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                            sizeof bias),
             "CUBLASLT_MATMUL_DESC_BIAS_POINTER");
  }

  // D = alpha op(A) op(B) + beta D (+ bias), queued on the stream.
  void run(LtProblem p, const void* A, const void* B, void* D, const void* bias, float alpha,
           float beta) {
    p.bias = bias != nullptr;
    p.align_a = pointer_alignment(A);
    p.align_b = pointer_alignment(B);
    p.align_d = pointer_alignment(D);
    const Plan& plan = plan_for(p, bias);
    if (bias) set_bias(plan, bias);
    check_lt(cublasLtMatmul(handle, plan.desc, &alpha, A, plan.a, B, plan.b, &beta, D, plan.d, D,
                            plan.d, &plan.algo, workspace, kWorkspaceBytes, stream),
             "cublasLtMatmul");
  }
};

Gemm::Gemm(Stream stream) : impl_(std::make_unique<Impl>()) {
  impl_->stream = stream;
  check_lt(cublasLtCreate(&impl_->handle), "cublasLtCreate");
  try {
    impl_->workspace = device_malloc(kWorkspaceBytes);
  } catch (...) {
    cublasLtDestroy(impl_->handle);
    throw;
  }
}

Gemm::~Gemm() {
  // The plans' descriptors may be destroyed while GEMMs that used them are
  // queued (cuBLASLt copies what it needs at enqueue); the workspace may not.
  try {
    stream_synchronize(impl_->stream);
  } catch (const std::exception&) {
    // A failed device: release what can be released.
  }
  impl_->plans.clear();
  device_free(impl_->workspace);
  cublasLtDestroy(impl_->handle);
}

size_t Gemm::workspace_bytes() const { return kWorkspaceBytes; }

void Gemm::matmul_forward(DType dt, void* out, const void* inp, const void* weight,
                          const void* bias, int N, int C, int OC) {
  check_matmul_shape("matmul_forward", N, C, OC);
  LtProblem p;
  p.trans_a = true;  // W as column-major [C,OC], transposed
  p.m = OC;
  p.n = N;
  p.k = C;
  p.lda = C;
  p.ldb = C;
  p.ldd = OC;
  p.ab = p.d = dt;
  if (bias && pointer_alignment(bias) < kBiasAlignment) {
    // out = bias broadcast, then out = 1 * inp W^T + 1 * out: one rounding of
    // sum + bias, the epilogue's arithmetic.
    const size_t n = size_t(N) * size_t(OC);
    if (dt == DType::kF32) {
      launch(broadcast_rows<float>, grid_for(n), kThreads, 0, impl_->stream, "matmul bias",
             static_cast<float*>(out), static_cast<const float*>(bias), size_t(N), size_t(OC));
    } else {
      launch(broadcast_rows<bf16>, grid_for(n), kThreads, 0, impl_->stream, "matmul bias",
             static_cast<bf16*>(out), static_cast<const bf16*>(bias), size_t(N), size_t(OC));
    }
    impl_->run(p, weight, inp, out, nullptr, 1.0f, 1.0f);
    return;
  }
  impl_->run(p, weight, inp, out, bias, 1.0f, 0.0f);
}

size_t Gemm::matmul_backward_scratch_bytes(int N, int OC) const {
  check_matmul_shape("matmul_backward", N, 1, OC);
  return column_sums_scratch_bytes(N, OC);
}

void Gemm::matmul_backward(DType dt, DType grad_dt, void* dinp, GradWrite dinp_mode, void* dweight,
                           void* dbias, GradWrite param_mode, const void* dout, const void* inp,
                           const void* weight, int N, int C, int OC, void* scratch) {
  check_matmul_shape("matmul_backward", N, C, OC);
  const bool accumulate_params = param_mode == GradWrite::kAccumulate;
  if (dbias) column_sums(grad_dt, dt, dbias, dout, N, OC, param_mode, scratch, impl_->stream);
  // dinp^T[C,N] = (W as [C,OC]) (dout as [OC,N]); beta 1 adds the old value
  // before the one rounding, as the CPU does.
  LtProblem p;
  p.m = C;
  p.n = N;
  p.k = OC;
  p.lda = C;
  p.ldb = OC;
  p.ldd = C;
  p.ab = p.d = dt;
  impl_->run(p, weight, dout, dinp, nullptr, 1.0f,
             dinp_mode == GradWrite::kAccumulate ? 1.0f : 0.0f);
  // dW^T[C,OC] = (inp as [C,N]) (dout as [OC,N])^T
  LtProblem q;
  q.trans_b = true;
  q.m = C;
  q.n = OC;
  q.k = N;
  q.lda = C;
  q.ldb = OC;
  q.ldd = C;
  q.ab = dt;
  q.d = grad_dt;
  impl_->run(q, inp, dout, dweight, nullptr, 1.0f, accumulate_params ? 1.0f : 0.0f);
}

void Gemm::batched(const Batched& s, DType ab_dt, const void* A, const void* B, DType d_dt,
                   void* D) {
  const long long a_cols = s.trans_a ? s.M : s.K, b_cols = s.trans_b ? s.K : s.N;
  if (s.M <= 0 || s.N <= 0 || s.K <= 0 || s.batch <= 0 || s.lda < a_cols || s.ldb < b_cols ||
      s.ldd < s.N) {
    throw std::invalid_argument("Gemm::batched: bad shape M=" + std::to_string(s.M) +
                                " N=" + std::to_string(s.N) + " K=" + std::to_string(s.K) +
                                " batch=" + std::to_string(s.batch) +
                                " lda=" + std::to_string(s.lda) + " ldb=" + std::to_string(s.ldb) +
                                " ldd=" + std::to_string(s.ldd));
  }
  // Row-major D[M,N] = op(A) op(B) is column-major D^T[N,M] = op(B)^T op(A)^T:
  // cuBLASLt's A is the caller's B (transposed as the caller's B is), its B the
  // caller's A.
  LtProblem p;
  p.trans_a = s.trans_b;
  p.trans_b = s.trans_a;
  p.m = s.N;
  p.n = s.M;
  p.k = s.K;
  p.lda = s.ldb;
  p.ldb = s.lda;
  p.ldd = s.ldd;
  p.batch = s.batch;
  p.stride_a = s.stride_b;
  p.stride_b = s.stride_a;
  p.stride_d = s.stride_d;
  p.ab = ab_dt;
  p.d = d_dt;
  impl_->run(p, B, A, D, nullptr, s.alpha, s.beta);
}

}  // namespace srkit::cuda
