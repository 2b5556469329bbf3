#include "kernels/cpu/gemm_bf16_path.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "kernels/cpu/gemm_bf16_dot.h"

namespace srkit::cpu {
namespace {

std::optional<Bf16GemmPath>& forced() {
  static std::optional<Bf16GemmPath> path;
  return path;
}

}  // namespace

Bf16GemmPath parse_bf16_gemm_path(const char* value, bool cpu_has_avx512_bf16) {
  const std::string v = value ? value : "";
  if (v.empty() || v == "auto") {
    return cpu_has_avx512_bf16 ? Bf16GemmPath::kAvx512Bf16 : Bf16GemmPath::kSgemm;
  }
  if (v == "sgemm") return Bf16GemmPath::kSgemm;
  if (v == "avx512bf16") {
    if (!cpu_has_avx512_bf16) {
      throw std::invalid_argument(
          "SRKIT_BF16_GEMM=avx512bf16, but this CPU has no AVX512_BF16 (use auto or sgemm)");
    }
    return Bf16GemmPath::kAvx512Bf16;
  }
  throw std::invalid_argument("SRKIT_BF16_GEMM='" + v +
                              "' is not a bf16 GEMM path (expected auto, sgemm or avx512bf16)");
}

Bf16GemmPath bf16_gemm_path() {
  if (forced()) return *forced();
  static const Bf16GemmPath chosen =
      parse_bf16_gemm_path(std::getenv("SRKIT_BF16_GEMM"), bf16_dot::cpu_supported());
  return chosen;
}

const char* bf16_gemm_path_name(Bf16GemmPath path) {
  return path == Bf16GemmPath::kAvx512Bf16 ? "avx512bf16" : "sgemm";
}

std::vector<Bf16GemmPath> runnable_bf16_gemm_paths() {
  std::vector<Bf16GemmPath> paths{Bf16GemmPath::kSgemm};
  if (bf16_dot::cpu_supported()) paths.push_back(Bf16GemmPath::kAvx512Bf16);
  return paths;
}

ScopedBf16GemmPath::ScopedBf16GemmPath(Bf16GemmPath path) : saved_(forced()) {
  if (path == Bf16GemmPath::kAvx512Bf16 && !bf16_dot::cpu_supported()) {
    throw std::runtime_error("ScopedBf16GemmPath: this CPU has no AVX512_BF16");
  }
  forced() = path;
}

ScopedBf16GemmPath::~ScopedBf16GemmPath() { forced() = saved_; }

}  // namespace srkit::cpu
