#include "lib/bench/peak_rate.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/cpu/gemm_tiles.h"
#include "kernels/cpu/workspace.h"
#include "lib/util/format.h"

namespace srkit {

PeakRate measure_gemm_peak(DType dtype, int n, int reps) {
  if (n < 1 || reps < 1) throw std::invalid_argument("measure_gemm_peak: n and reps must be >= 1");
  const size_t nn = size_t(n) * size_t(n);
  // Values in [-1, 1): no denormals or overflow to slow anything down.
  std::vector<float> a(nn), b(nn), c(nn, 0.0f);
  for (size_t i = 0; i < nn; ++i) {
    a[i] = float(int(i * 2654435761u % 2001u) - 1000) * 1e-3f;
    b[i] = float(int(i * 40503u % 2001u) - 1000) * 1e-3f;
  }
  std::vector<bf16> a16, b16, c16;
  cpu::Workspace workspace;
  std::function<void()> gemm;
  if (dtype == DType::kF32) {
    gemm = [&] { cpu::sgemm(false, false, n, n, n, a.data(), n, b.data(), n, 0.0f, c.data(), n); };
  } else {
    a16.resize(nn);
    b16.resize(nn);
    c16.resize(nn);
    for (size_t i = 0; i < nn; ++i) {
      a16[i] = float_to_bf16_rn(a[i]);
      b16[i] = float_to_bf16_rn(b[i]);
    }
    // Captured by value: the lambda outlives this block.
    const cpu::GemmProduct<bf16> product{
        n, n, n, a16.data(), n, false, b16.data(), n, false, c16.data(), n, nullptr, false};
    gemm = [&workspace, product] { cpu::gemm_tiled(&product, 1, workspace); };
  }
  gemm();  // first call: thread pool start-up, page faults, workspace
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    gemm();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(2.0 * double(n) * double(n) * double(n) / s / 1e9);
  }
  // The best call, not the median: a peak is what the machine can reach, and
  // on a shared VM the median of 5 moved by 2x between back-to-back runs
  // (98.5 and 180.8 GFLOP/s on one Zen 4) while the best of 10 held.
  PeakRate p;
  p.gflops = *std::max_element(rates.begin(), rates.end());
  p.source = strprintf("%s %dx%dx%d measured (best of %d)",
                       dtype == DType::kF32 ? "sgemm" : "srkit bf16 GEMM", n, n, n, reps);
  return p;
}

std::optional<double> datasheet_gflops(const std::string& name, DType dtype) {
  // TFLOP/s from NVIDIA's datasheets: dense bf16 tensor-core rates (the sparse
  // figure halved) and fp32 CUDA-core rates. Order matters: the more specific
  // name first.
  struct Entry {
    const char* needle;
    double bf16_tflops, f32_tflops;
  };
  static constexpr Entry kTable[] = {
      {"H100 PCIe", 756.0, 51.2},  // H100 PCIe
      {"H100", 989.0, 67.0},       // H100 SXM5
      {"H200", 989.0, 67.0},       // H200 SXM (same GH100 compute as H100 SXM)
      {"A100", 312.0, 19.5},       // A100 SXM4 and PCIe
  };
  for (const Entry& e : kTable) {
    if (name.find(e.needle) != std::string::npos) {
      return (dtype == DType::kF32 ? e.f32_tflops : e.bf16_tflops) * 1e3;
    }
  }
  return std::nullopt;
}

PeakRate device_peak(const Backend& backend, double override_gflops, DType compute) {
  if (override_gflops > 0.0) return {override_gflops, "--peak-gflops"};
  if (backend.kind() == DeviceKind::kCpu) return measure_gemm_peak(compute);
  const std::string device = backend.description();
#if defined(SRKIT_CUDA_EMU)
  return {0.0, device + ": no peak rate"};
#else
  const std::string what = compute == DType::kF32 ? "fp32" : "dense bf16";
  if (const auto g = datasheet_gflops(device, compute)) {
    return {*g, "datasheet " + what + ": " + device};
  }
  throw std::invalid_argument("--peak-gflops: no datasheet " + what + " rate for " + device +
                              "; give the device's peak GFLOP/s");
#endif
}

}  // namespace srkit
