#include "kernels/cpu/cpu_isa.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace srkit::cpu {
namespace {

std::optional<CpuIsa>& forced() {
  static std::optional<CpuIsa> isa;
  return isa;
}

}  // namespace

bool cpu_has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

CpuIsa parse_cpu_isa(const char* value, bool has_avx512) {
  const std::string v = value ? value : "";
  if (v.empty() || v == "auto") return has_avx512 ? CpuIsa::kAvx512 : CpuIsa::kAvx2;
  if (v == "avx2") return CpuIsa::kAvx2;
  if (v == "avx512") {
    if (!has_avx512) {
      throw std::invalid_argument(
          "SRKIT_CPU_ISA=avx512, but this CPU lacks AVX-512 F/BW/VL/DQ (use auto or avx2)");
    }
    return CpuIsa::kAvx512;
  }
  throw std::invalid_argument("SRKIT_CPU_ISA='" + v +
                              "' is not an instruction set (expected auto, avx2 or avx512)");
}

CpuIsa cpu_isa() {
  if (forced()) return *forced();
  static const CpuIsa chosen = parse_cpu_isa(std::getenv("SRKIT_CPU_ISA"), cpu_has_avx512());
  return chosen;
}

const char* cpu_isa_name(CpuIsa isa) { return isa == CpuIsa::kAvx512 ? "avx512" : "avx2"; }

std::vector<CpuIsa> runnable_cpu_isas() {
  std::vector<CpuIsa> isas{CpuIsa::kAvx2};
  if (cpu_has_avx512()) isas.push_back(CpuIsa::kAvx512);
  return isas;
}

ScopedCpuIsa::ScopedCpuIsa(CpuIsa isa) : saved_(forced()) {
  if (isa == CpuIsa::kAvx512 && !cpu_has_avx512()) {
    throw std::invalid_argument("ScopedCpuIsa: this CPU lacks AVX-512 F/BW/VL/DQ");
  }
  forced() = isa;
}

ScopedCpuIsa::~ScopedCpuIsa() { forced() = saved_; }

}  // namespace srkit::cpu
