#include "kernels/cpu/cpu_isa.h"

namespace srkit::cpu {
namespace {

constexpr IsaChoice::Rule kRule{
    "SRKIT_CPU_ISA", "avx2", "avx512", "an instruction set", "this CPU lacks AVX-512 F/BW/VL/DQ",
    cpu_has_avx512};

}  // namespace

bool cpu_has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

CpuIsa parse_cpu_isa(const char* value, bool has_avx512) {
  return IsaChoice::parse(kRule, value, has_avx512);
}

CpuIsa cpu_isa() { return IsaChoice::current(kRule); }

const char* cpu_isa_name(CpuIsa isa) { return IsaChoice::name(kRule, isa); }

std::vector<CpuIsa> runnable_cpu_isas() { return IsaChoice::runnable(kRule); }

ScopedCpuIsa::ScopedCpuIsa(CpuIsa isa) : scoped_(kRule, isa) {}

}  // namespace srkit::cpu
