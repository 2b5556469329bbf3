// Provenance: what built this binary and what it runs on, recorded in every
// run's JSONL header and checkpoint (and printed by --version), so a number can
// be traced to the code, the flags that change numerics, and the hardware.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace srkit {

// srkit version; git commit and whether the tree had local changes (empty
// outside a git checkout); build type; compiler; the flags that change
// numerics (-ffp-contract, -march); CUDA (off, emulated, or the nvcc version
// and architectures); MPI.
nlohmann::json build_facts();

// The CPU model, its SIMD level (the widest of avx2, avx512f, avx512_bf16,
// amx_bf16 it has), the instruction set of the CPU kernels (avx2 or avx512:
// same bits, kernels/cpu/cpu_isa.h), the path of the CPU's bf16 GEMM (sgemm or avx512bf16:
// they sum in different orders, kernels/cpu/gemm_bf16_path.h), the logical CPUs and the OpenMP
// threads a parallel region gets now (after the CPU backend has set them: the run's thread count).
nlohmann::json host_facts();

// build_facts() and host_facts() as "key: value" lines, for --version.
std::string build_facts_text();

// The SIMD level named in /proc/cpuinfo's flags line (separate for testing).
std::string simd_level_from_flags(const std::string& flags_line);

}  // namespace srkit
