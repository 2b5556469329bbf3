// The peak FLOP/s that sr-bench's MFU divides by, per compute dtype: the
// user's --peak-gflops (for every dtype), or as each device is known: on CPU the rate this
// machine's GEMMs of that dtype reach, measured at start with the threads in use; on a GPU the
// datasheet dense rate of the device for that dtype (bf16 tensor cores; fp32 without TF32, which
// srkit does not use). A bf16 step is measured against the bf16 peak and an fp32 step against the
// fp32 one, so neither reads above 100% nor near 0 for want of the other's rate.
#pragma once

#include <optional>
#include <string>

#include "kernels/common/dtype.h"
#include "lib/backend/backend.h"

namespace srkit {

struct PeakRate {
  double gflops = 0.0;
  std::string source;  // how it was obtained, for tables and JSON
};

// Highest GFLOP/s of `reps` square n x n x n GEMMs after one untimed call,
// with the OpenMP/BLAS threads currently set (make_backend sets them). fp32:
// OpenBLAS's own threaded sgemm (the machine's ceiling for fp32). bf16:
// srkit's tiled bf16 GEMM (kernels/cpu/gemm_tiles.h, the path chosen by
// SRKIT_BF16_GEMM), the only bf16 GEMM this build has: the rate the model's
// bf16 products can reach.
PeakRate measure_gemm_peak(DType dtype, int n = 1024, int reps = 10);

// Dense (no sparsity) GFLOP/s from the vendor datasheet for a CUDA device
// name as cudaGetDeviceProperties reports it ("NVIDIA H100 80GB HBM3",
// "NVIDIA A100-SXM4-80GB", ...): bf16 on tensor cores, fp32 on the CUDA
// cores; nullopt for a device not in the table.
std::optional<double> datasheet_gflops(const std::string& device_name, DType dtype);

// override_gflops when > 0; else on the CPU measure_gemm_peak(compute), on a
// GPU its datasheet rate (found in Backend::description(), which names the
// device), in the CUDA emulation 0 ("no peak rate"). Throws
// std::invalid_argument naming --peak-gflops for a GPU not in the datasheet
// table.
PeakRate device_peak(const Backend& backend, double override_gflops, DType compute);

}  // namespace srkit
