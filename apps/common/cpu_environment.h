// The environment variables that steer the CPU kernels, SRKIT_CPU_ISA
// (kernels/cpu/cpu_isa.h) and SRKIT_BF16_GEMM (kernels/cpu/gemm_bf16_path.h),
// read when a program starts: a bad value is then a one-line error and exit 2,
// not an exception thrown on the first use, which may be inside a parallel
// region where it can only abort.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/gemm_bf16_path.h"

namespace srkit::cli {

// The first variable's error message, or nothing when both are good.
inline std::optional<std::string> cpu_environment_error() {
  try {
    cpu::cpu_isa();
    cpu::bf16_gemm_path();
  } catch (const std::invalid_argument& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

}  // namespace srkit::cli
