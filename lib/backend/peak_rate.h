// The peak FLOP/s that MFU divides by, as each backend knows it: on CPU the
// BLAS sgemm rate measured at start (what this machine's GEMMs can reach with
// the threads in use), on a GPU the datasheet dense bf16 rate of the device.
#pragma once

#include <optional>
#include <string>

namespace srkit {

struct PeakRate {
  double gflops = 0.0;
  std::string source;  // how it was obtained, for tables and JSON
};

// Highest GFLOP/s of `reps` square n x n x n fp32 GEMMs through the CPU GEMM
// (kernels/cpu/gemm.h, OpenBLAS) after one untimed call, with the OpenMP/BLAS
// threads currently set (make_backend sets them).
PeakRate measure_sgemm_peak(int n = 1024, int reps = 10);

// Dense (no sparsity) bf16 tensor-core GFLOP/s from the vendor datasheet for a
// CUDA device name as cudaGetDeviceProperties reports it ("NVIDIA H100 80GB
// HBM3", "NVIDIA A100-SXM4-80GB", ...); nullopt for a device not in the table.
std::optional<double> datasheet_bf16_gflops(const std::string& device_name);

}  // namespace srkit
