// The CPU emulation of cuBLASLt (docs/cuda-emulation.md) refuses what it does
// not implement and what a GPU might fault on, naming it: an attribute or
// compute type outside the subset srkit uses throws naming it, and so does a
// pointer less aligned than the algorithm was chosen for. Built only in the
// emulation build, where these are the emulation's own promises; a GPU has
// none of them to check.
#include <cublasLt.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/compat.cuh"
#include "kernels/cuda/device.h"

namespace srkit {
namespace {

void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(what) + " failed: status " + std::to_string(int(s)));
  }
}

template <typename F>
void expect_throw_naming(F&& f, const std::string& name) {
  try {
    f();
    ADD_FAILURE() << "no exception for " << name;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

TEST(CublasLtEmulation, UnimplementedAttributesThrowNamingThem) {
  cublasLtMatmulDesc_t desc = nullptr;
  check_lt(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  const int32_t on = 1;
  expect_throw_naming(
      [&] {
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on, sizeof on);
      },
      "CUBLASLT_MATMUL_DESC_FAST_ACCUM");
  const uint32_t dgelu = CUBLASLT_EPILOGUE_DGELU_BGRAD;
  expect_throw_naming(
      [&] {
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &dgelu, sizeof dgelu);
      },
      "CUBLASLT_EPILOGUE_DGELU_BGRAD");
  const int32_t half = CUDA_R_16F;
  expect_throw_naming(
      [&] {
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &half,
                                       sizeof half);
      },
      "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE");
  cublasLtMatmulDesc_t tf32 = nullptr;
  expect_throw_naming(
      [&] { cublasLtMatmulDescCreate(&tf32, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F); },
      "compute type");
  // A malformed value is the real library's status, not an exception.
  const int32_t bad_op = 7;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &bad_op, 2),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulDescDestroy(desc);
}

// A GPU kernel picked for more alignment than a pointer has may fault; the
// emulation refuses such a call, naming the preference that would have allowed
// it. The same call with that preference set runs.
TEST(CublasLtEmulation, AlgorithmsHoldTheAlignmentTheyWereChosenFor) {
  cublasLtHandle_t lt = nullptr;
  check_lt(cublasLtCreate(&lt), "cublasLtCreate");
  const int n = 8;
  // One buffer for everything, with room for slices one float past 256 bytes.
  float* base = static_cast<float*>(cuda::device_malloc(4 * 4096));
  cuda::copy_to_device(base, std::vector<float>(4096, 0.5f).data(), 4 * 4096);
  float* a = base;
  float* a_unaligned = base + 1;  // 4-byte aligned
  float* b = base + 512;
  float* d = base + 1024;
  float* bias = base + 2048;
  cublasLtMatrixLayout_t layout = nullptr;
  check_lt(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, n, n, n), "layout");
  auto run = [&](const float* a_ptr, const float* bias_ptr, uint32_t align_a) {
    cublasLtMatmulDesc_t desc = nullptr;
    check_lt(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
    if (bias_ptr) {
      const uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
      check_lt(
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
          "EPILOGUE");
      check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr,
                                              sizeof bias_ptr),
               "BIAS_POINTER");
    }
    cublasLtMatmulPreference_t pref = nullptr;
    check_lt(cublasLtMatmulPreferenceCreate(&pref), "preference");
    if (align_a) {
      check_lt(cublasLtMatmulPreferenceSetAttribute(
                   pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a),
               "MIN_ALIGNMENT_A_BYTES");
    }
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    check_lt(cublasLtMatmulAlgoGetHeuristic(lt, desc, layout, layout, layout, layout, pref, 1,
                                            &heuristic, &found),
             "heuristic");
    cublasLtMatmulPreferenceDestroy(pref);
    const float one = 1.0f, zero = 0.0f;
    struct Release {
      cublasLtMatmulDesc_t desc;
      ~Release() { cublasLtMatmulDescDestroy(desc); }
    } release{desc};
    check_lt(cublasLtMatmul(lt, desc, &one, a_ptr, layout, b, layout, &zero, d, layout, d, layout,
                            &heuristic.algo, nullptr, 0, nullptr),
             "cublasLtMatmul");
    cuda::synchronize();
  };
  run(a, nullptr, 0);  // everything 256-byte aligned: the default preference holds
  expect_throw_naming([&] { run(a_unaligned, nullptr, 0); },
                      "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES");
  run(a_unaligned, nullptr, 4);  // chosen for 4-byte aligned A
  run(a, bias, 0);
  expect_throw_naming([&] { run(a, bias + 1, 0); }, "BIAS_POINTER");
  cublasLtMatrixLayoutDestroy(layout);
  cuda::device_free(base);
  cublasLtDestroy(lt);
}

}  // namespace
}  // namespace srkit
