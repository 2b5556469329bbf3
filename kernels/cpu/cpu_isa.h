// Which instruction set the CPU's AVX-512-capable kernels use (the Philox of
// kernels/cpu/philox_simd.h, the AdamW loops of kernels/cpu/adamw.cpp): AVX2, the build's baseline
// (x86-64-v3), or AVX-512 where the CPU has it. One build runs everywhere; the choice changes
// speed, never bits (tests/test_philox.cpp, test_cast_cpu.cpp, test_adamw.cpp and
// test_trainer.cpp force each ISA the CPU supports and compare). A run's provenance records it
// as host.cpu_isa.
//
// Chosen once per process from SRKIT_CPU_ISA: `auto` (unset: avx512 where the
// CPU has AVX-512 F, BW, VL and DQ, else avx2), `avx2` or `avx512`.
#pragma once

#include <vector>

#include "kernels/cpu/env_choice.h"

namespace srkit::cpu {

enum class CpuIsa { kAvx2, kAvx512 };  // baseline, extended (kernels/cpu/env_choice.h)
using IsaChoice = EnvChoice<CpuIsa>;

// The CPU has AVX-512 F, BW, VL and DQ (every AVX-512 x86 since Skylake-SP).
bool cpu_has_avx512();

// The ISA the kernels take. Throws std::invalid_argument with a one-line
// message when SRKIT_CPU_ISA holds an unknown value or asks for avx512 on a
// CPU without it.
CpuIsa cpu_isa();

const char* cpu_isa_name(CpuIsa isa);

// The ISAs this CPU can run, avx2 first (tests and benchmarks loop over them).
std::vector<CpuIsa> runnable_cpu_isas();

// The ISA SRKIT_CPU_ISA's value selects on a CPU that has (or lacks) AVX-512;
// value null means unset. The rule behind cpu_isa, exposed for tests.
CpuIsa parse_cpu_isa(const char* value, bool cpu_has_avx512);

// Forces an ISA while alive (tests and benchmarks compare them); restores the
// previous choice after. Throws std::invalid_argument for avx512 on a CPU
// without it.
class ScopedCpuIsa {
 public:
  explicit ScopedCpuIsa(CpuIsa isa);

 private:
  IsaChoice::Scoped scoped_;
};

}  // namespace srkit::cpu
