// The emulated cuBLASLt subset (kernels/cuda/emu/include/cublasLt.h): handles,
// descriptors and their attributes, validation of a call, and the GEMM queued in
// stream order (kernels/cuda/emu/matmul_cpu.cpp does the arithmetic).
#include <cublasLt.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cuda/emu/host_task.h"
#include "kernels/cuda/emu/matmul_cpu.h"

struct cublasLtContext {
  int unused = 0;
};

struct cublasLtMatmulDescOpaque_t {
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int bias_type = -1;  // -1: D's type
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int aux_type = -1;  // -1: D's type
};

struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t batch_stride = 0;
};

struct cublasLtMatmulPreferenceOpaque_t {
  uint64_t max_workspace = 0;
  uint32_t min_alignment[4] = {256, 256, 256, 256};  // A, B, C, D: the real defaults
};

namespace {

using srkit::cuda::emu::ElemType;

[[noreturn]] void not_implemented(const std::string& what) {
  throw std::runtime_error("cuBLASLt emulation: " + what +
                           " is not implemented (kernels/cuda/emu/cublaslt.cpp)");
}

template <typename T>
bool read_value(const void* buf, size_t size, T* out) {
  if (!buf || size != sizeof(T)) return false;
  std::memcpy(out, buf, sizeof(T));
  return true;
}

const char* desc_attribute_name(cublasLtMatmulDescAttributes_t a) {
  switch (a) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
      return "CUBLASLT_MATMUL_DESC_COMPUTE_TYPE";
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
      return "CUBLASLT_MATMUL_DESC_SCALE_TYPE";
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
      return "CUBLASLT_MATMUL_DESC_POINTER_MODE";
    case CUBLASLT_MATMUL_DESC_TRANSC:
      return "CUBLASLT_MATMUL_DESC_TRANSC";
    case CUBLASLT_MATMUL_DESC_FILL_MODE:
      return "CUBLASLT_MATMUL_DESC_FILL_MODE";
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
      return "CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE";
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
      return "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE";
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM:
      return "CUBLASLT_MATMUL_DESC_FAST_ACCUM";
    default:
      return "this CUBLASLT_MATMUL_DESC attribute";
  }
}

const char* epilogue_name(uint32_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_RELU:
      return "CUBLASLT_EPILOGUE_RELU";
    case CUBLASLT_EPILOGUE_RELU_BIAS:
      return "CUBLASLT_EPILOGUE_RELU_BIAS";
    case CUBLASLT_EPILOGUE_RELU_AUX:
      return "CUBLASLT_EPILOGUE_RELU_AUX";
    case CUBLASLT_EPILOGUE_RELU_AUX_BIAS:
      return "CUBLASLT_EPILOGUE_RELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DRELU:
      return "CUBLASLT_EPILOGUE_DRELU";
    case CUBLASLT_EPILOGUE_DRELU_BGRAD:
      return "CUBLASLT_EPILOGUE_DRELU_BGRAD";
    case CUBLASLT_EPILOGUE_DGELU:
      return "CUBLASLT_EPILOGUE_DGELU";
    case CUBLASLT_EPILOGUE_DGELU_BGRAD:
      return "CUBLASLT_EPILOGUE_DGELU_BGRAD";
    case CUBLASLT_EPILOGUE_BGRADA:
      return "CUBLASLT_EPILOGUE_BGRADA";
    case CUBLASLT_EPILOGUE_BGRADB:
      return "CUBLASLT_EPILOGUE_BGRADB";
    default:
      return nullptr;
  }
}

bool epilogue_implemented(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_DEFAULT || e == CUBLASLT_EPILOGUE_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_AUX ||
         e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}

// bf16 and fp32 are implemented; the other types cuBLASLt knows throw.
ElemType elem_type(int t, const char* role) {
  if (t == CUDA_R_32F) return ElemType::kF32;
  if (t == CUDA_R_16BF) return ElemType::kBF16;
  not_implemented(std::string("cudaDataType ") + std::to_string(t) + " for " + role +
                  " (only CUDA_R_16BF and CUDA_R_32F)");
}

// Sets *out to the (op(A), op(B), C, D) problem of a call, or returns the
// status the real library gives for a malformed one.
cublasStatus_t plan(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                    cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                    srkit::cuda::emu::MatmulProblem* out) {
  if (!desc || !A || !B || !C || !D) return CUBLAS_STATUS_INVALID_VALUE;
  srkit::cuda::emu::MatmulProblem p{};
  p.trans_a = desc->trans_a == CUBLAS_OP_T;
  p.trans_b = desc->trans_b == CUBLAS_OP_T;
  p.m = int64_t(p.trans_a ? A->cols : A->rows);
  p.k = int64_t(p.trans_a ? A->rows : A->cols);
  const int64_t kb = int64_t(p.trans_b ? B->cols : B->rows);
  p.n = int64_t(p.trans_b ? B->rows : B->cols);
  if (kb != p.k || D->rows != uint64_t(p.m) || D->cols != uint64_t(p.n) || C->rows != D->rows ||
      C->cols != D->cols) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  for (const cublasLtMatrixLayoutOpaque_t* l : {A, B, C, D}) {
    if (l->ld < int64_t(l->rows) || l->ld < 1) return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (A->batch != D->batch || B->batch != D->batch || C->batch != D->batch) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  p.batch = D->batch;
  const ElemType ta = elem_type(A->type, "A"), tb = elem_type(B->type, "B");
  const ElemType tc = elem_type(C->type, "C"), td = elem_type(D->type, "D");
  if (ta != tb || tc != td || (ta == ElemType::kF32 && td == ElemType::kBF16)) {
    not_implemented("the type combination A " + std::to_string(A->type) + ", B " +
                    std::to_string(B->type) + ", C " + std::to_string(C->type) + ", D " +
                    std::to_string(D->type));
  }
  p.a = {nullptr, ta, A->ld, A->batch_stride};
  p.b = {nullptr, tb, B->ld, B->batch_stride};
  p.c = {nullptr, tc, C->ld, C->batch_stride};
  p.d_type = td;
  p.ldd = D->ld;
  p.d_batch_stride = D->batch_stride;
  const uint32_t e = desc->epilogue;
  p.gelu = (e & CUBLASLT_EPILOGUE_GELU) != 0;
  if (e & CUBLASLT_EPILOGUE_BIAS) {
    if (!desc->bias) return CUBLAS_STATUS_INVALID_VALUE;
    p.bias = desc->bias;
    p.bias_type = desc->bias_type < 0 ? td : elem_type(desc->bias_type, "the bias");
  }
  if (e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
    if (!desc->aux || desc->aux_ld < p.m) return CUBLAS_STATUS_INVALID_VALUE;
    if (p.batch > 1) not_implemented("a GELU aux output with batch count > 1");
    p.aux = desc->aux;
    p.aux_ld = desc->aux_ld;
    p.aux_type = desc->aux_type < 0 ? td : elem_type(desc->aux_type, "the GELU aux output");
  }
  *out = p;
  return CUBLAS_STATUS_SUCCESS;
}

// Marks an algorithm the emulated heuristic returned; data[1..4] hold the
// minimum alignments of A, B, C and D it was chosen for.
constexpr uint64_t kAlgoMagic = 0x7372656d756c7431ull;
constexpr const char* kAlignmentPreferenceNames[4] = {
    "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES", "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES",
    "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES", "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES"};
// No preference covers the bias pointer, and the heuristic may pick a kernel
// that loads it in 16-byte vectors (a less aligned bias can then fault with
// "misaligned address"), so the emulation asks for that much.
constexpr uint64_t kBiasAlignment = 16;

// A GPU kernel chosen for more alignment than a pointer has faults or reads
// wrong data; the emulation refuses such a call, naming what to set.
void check_alignment(const void* ptr, uint64_t required, const char* what) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  if (required > 1 && address % required != 0) {
    throw std::runtime_error("cuBLASLt emulation: a pointer aligned to fewer than " +
                             std::to_string(required) + " bytes, the alignment assumed by " + what +
                             " (on a GPU: a misaligned-address fault or wrong results)");
  }
}

}  // namespace

const char* cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasLtGetStatusString(cublasStatus_t status) { return cublasLtGetStatusName(status); }

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
  if (computeType != CUBLAS_COMPUTE_32F) {
    not_implemented("compute type " + std::to_string(int(computeType)) +
                    " (only CUBLAS_COMPUTE_32F)");
  }
  if (scaleType != CUDA_R_32F) {
    not_implemented("scale type " + std::to_string(int(scaleType)) + " (only CUDA_R_32F)");
  }
  *desc = new cublasLtMatmulDescOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t sizeInBytes) {
  if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB: {
      int32_t op = 0;
      if (!read_value(buf, sizeInBytes, &op)) return CUBLAS_STATUS_INVALID_VALUE;
      if (op == CUBLAS_OP_C) not_implemented("CUBLAS_OP_C");
      if (op != CUBLAS_OP_N && op != CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
      (attr == CUBLASLT_MATMUL_DESC_TRANSA ? desc->trans_a : desc->trans_b) =
          static_cast<cublasOperation_t>(op);
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
      uint32_t e = 0;
      if (!read_value(buf, sizeInBytes, &e)) return CUBLAS_STATUS_INVALID_VALUE;
      if (const char* name = epilogue_name(e)) not_implemented(std::string("epilogue ") + name);
      if (!epilogue_implemented(e)) return CUBLAS_STATUS_INVALID_VALUE;
      desc->epilogue = static_cast<cublasLtEpilogue_t>(e);
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return read_value(buf, sizeInBytes, &desc->bias) ? CUBLAS_STATUS_SUCCESS
                                                       : CUBLAS_STATUS_INVALID_VALUE;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      return read_value(buf, sizeInBytes, &desc->aux) ? CUBLAS_STATUS_SUCCESS
                                                      : CUBLAS_STATUS_INVALID_VALUE;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
      return read_value(buf, sizeInBytes, &desc->aux_ld) ? CUBLAS_STATUS_SUCCESS
                                                         : CUBLAS_STATUS_INVALID_VALUE;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: {
      int32_t t = 0;
      if (!read_value(buf, sizeInBytes, &t)) return CUBLAS_STATUS_INVALID_VALUE;
      const bool bias = attr == CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE;
      elem_type(t, bias ? "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE"
                        : "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE");
      (bias ? desc->bias_type : desc->aux_type) = t;
      return CUBLAS_STATUS_SUCCESS;
    }
    default:
      not_implemented(std::string(desc_attribute_name(attr)) + " (attribute " +
                      std::to_string(int(attr)) + ")");
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t sizeInBytes) {
  if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: {
      int32_t count = 0;
      if (!read_value(buf, sizeInBytes, &count) || count < 1) return CUBLAS_STATUS_INVALID_VALUE;
      layout->batch = count;
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
      return read_value(buf, sizeInBytes, &layout->batch_stride) ? CUBLAS_STATUS_SUCCESS
                                                                 : CUBLAS_STATUS_INVALID_VALUE;
    default:
      not_implemented("CUBLASLT_MATRIX_LAYOUT attribute " + std::to_string(int(attr)) +
                      " (only BATCH_COUNT and STRIDED_BATCH_OFFSET)");
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t sizeInBytes) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return read_value(buf, sizeInBytes, &pref->max_workspace) ? CUBLAS_STATUS_SUCCESS
                                                                : CUBLAS_STATUS_INVALID_VALUE;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: {
      uint32_t bytes = 0;
      if (!read_value(buf, sizeInBytes, &bytes)) return CUBLAS_STATUS_INVALID_VALUE;
      pref->min_alignment[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = bytes;
      return CUBLAS_STATUS_SUCCESS;
    }
    default:
      not_implemented("CUBLASLT_MATMUL_PREF attribute " + std::to_string(int(attr)) +
                      " (only MAX_WORKSPACE_BYTES and MIN_ALIGNMENT_A/B/C/D_BYTES)");
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!preference || requestedAlgoCount < 1 || !heuristicResultsArray || !returnAlgoCount) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  srkit::cuda::emu::MatmulProblem p;
  if (const cublasStatus_t s = plan(desc, Adesc, Bdesc, Cdesc, Ddesc, &p); s) return s;
  heuristicResultsArray[0] = cublasLtMatmulHeuristicResult_t{};
  // The algorithm remembers the alignments it was chosen for (cublasLtMatmul checks them).
  cublasLtMatmulAlgo_t& algo = heuristicResultsArray[0].algo;
  algo.data[0] = kAlgoMagic;
  for (int i = 0; i < 4; ++i) algo.data[1 + i] = preference->min_alignment[i];
  heuristicResultsArray[0].state = CUBLAS_STATUS_SUCCESS;
  heuristicResultsArray[0].wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                              cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t* algo, void*, size_t,
                              srkit::cuda::Stream stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  srkit::cuda::emu::MatmulProblem p;
  if (const cublasStatus_t s = plan(desc, Adesc, Bdesc, Cdesc, Ddesc, &p); s) return s;
  if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&p.alpha, alpha, sizeof(float));  // host pointers (the default pointer mode)
  std::memcpy(&p.beta, beta, sizeof(float));
  if (!D || (p.m * p.n * p.k > 0 && (!A || !B)) || (p.beta != 0.0f && !C)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (p.m == 0 || p.n == 0) return CUBLAS_STATUS_SUCCESS;
  // An algorithm from the heuristic assumes its preference's pointer
  // alignments; without one, the library picks for the call as it is.
  if (algo && algo->data[0] == kAlgoMagic) {
    const void* pointers[4] = {A, B, C, D};
    for (int i = 0; i < 4; ++i) {
      if (!pointers[i] || (i == 2 && p.beta == 0.0f)) continue;
      check_alignment(pointers[i], algo->data[1 + i], kAlignmentPreferenceNames[i]);
    }
  }
  if (p.bias) check_alignment(p.bias, kBiasAlignment, "the bias epilogue (BIAS_POINTER)");
  p.a.data = A;
  p.b.data = B;
  p.c.data = C;
  p.d = D;
  srkit::cuda::emu::enqueue_host_task(
      stream, [p] { srkit::cuda::emu::matmul_cpu(p); }, "cublasLtMatmul (emulated)");
  return CUBLAS_STATUS_SUCCESS;
}
