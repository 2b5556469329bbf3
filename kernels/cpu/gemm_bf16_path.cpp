#include "kernels/cpu/gemm_bf16_path.h"

#include "kernels/cpu/gemm_bf16_dot.h"

namespace srkit::cpu {
namespace {

constexpr Bf16GemmChoice::Rule kRule{"SRKIT_BF16_GEMM",
                                     "sgemm",
                                     "avx512bf16",
                                     "a bf16 GEMM path",
                                     "this CPU has no AVX512_BF16",
                                     bf16_dot::cpu_supported};

}  // namespace

Bf16GemmPath parse_bf16_gemm_path(const char* value, bool cpu_has_avx512_bf16) {
  return Bf16GemmChoice::parse(kRule, value, cpu_has_avx512_bf16);
}

Bf16GemmPath bf16_gemm_path() { return Bf16GemmChoice::current(kRule); }

const char* bf16_gemm_path_name(Bf16GemmPath path) { return Bf16GemmChoice::name(kRule, path); }

std::vector<Bf16GemmPath> runnable_bf16_gemm_paths() { return Bf16GemmChoice::runnable(kRule); }

ScopedBf16GemmPath::ScopedBf16GemmPath(Bf16GemmPath path) : scoped_(kRule, path) {}

}  // namespace srkit::cpu
