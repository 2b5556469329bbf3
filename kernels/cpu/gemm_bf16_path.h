// Which bf16 GEMM gemm_tiled runs (kernels/cpu/gemm_tiles.h): operands widened to
// fp32 for OpenBLAS's sgemm, or multiplied as bf16 by AVX512_BF16's VDPBF16PS
// (kernels/cpu/gemm_bf16_dot.h). The two round the same fp32 tile the same
// way but sum it in different orders (docs/architecture.md, "The bf16 GEMM on
// AVX512_BF16"), so a run's provenance records the path.
//
// Chosen once per process from SRKIT_BF16_GEMM: `auto` (unset: avx512bf16
// where the CPU has it, else sgemm), `sgemm` or `avx512bf16`.
#pragma once

#include <vector>

#include "kernels/cpu/env_choice.h"

namespace srkit::cpu {

enum class Bf16GemmPath { kSgemm, kAvx512Bf16 };  // baseline, extended (kernels/cpu/env_choice.h)
using Bf16GemmChoice = EnvChoice<Bf16GemmPath>;

// The path gemm_tiled takes for bf16 products. Throws std::invalid_argument with a
// one-line message when SRKIT_BF16_GEMM holds an unknown value or asks for
// avx512bf16 on a CPU without it.
Bf16GemmPath bf16_gemm_path();

const char* bf16_gemm_path_name(Bf16GemmPath path);

// The paths this CPU can run, sgemm first (tests and benchmarks loop over them).
std::vector<Bf16GemmPath> runnable_bf16_gemm_paths();

// The path SRKIT_BF16_GEMM's value selects on a CPU that has (or lacks)
// AVX512_BF16; value null means unset. The rule behind bf16_gemm_path, exposed
// for tests.
Bf16GemmPath parse_bf16_gemm_path(const char* value, bool cpu_has_avx512_bf16);

// Forces a path while alive (tests and benchmarks compare the two); restores
// the previous choice after. Throws std::invalid_argument for avx512bf16 on a
// CPU without it.
class ScopedBf16GemmPath {
 public:
  explicit ScopedBf16GemmPath(Bf16GemmPath path);

 private:
  Bf16GemmChoice::Scoped scoped_;
};

}  // namespace srkit::cpu
