#include "lib/util/build_info.h"

#include <omp.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/gemm_bf16_path.h"
#include "srkit/build_flags.h"
#include "srkit/git_info.h"

namespace srkit {
namespace {

// The value of the first "key : value" line of /proc/cpuinfo with this key.
std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.pop_back();
    if (name != key) continue;
    const size_t value = line.find_first_not_of(' ', colon + 1);
    return value == std::string::npos ? "" : line.substr(value);
  }
  return "";
}

bool has_flag(const std::string& flags, const std::string& flag) {
  std::istringstream words(flags);
  std::string w;
  while (words >> w) {
    if (w == flag) return true;
  }
  return false;
}

nlohmann::json cuda_facts() {
#if defined(SRKIT_CUDA_EMU)
  return {{"enabled", true}, {"emulated", true}};
#elif defined(SRKIT_HAVE_CUDA)
  return {{"enabled", true},
          {"emulated", false},
          {"nvcc", SRKIT_BUILD_CUDA_COMPILER},
          {"architectures", SRKIT_BUILD_CUDA_ARCHS}};
#else
  return {{"enabled", false}};
#endif
}

}  // namespace

std::string simd_level_from_flags(const std::string& flags) {
  if (has_flag(flags, "amx_bf16")) return "amx_bf16";
  if (has_flag(flags, "avx512_bf16")) return "avx512_bf16";
  if (has_flag(flags, "avx512f")) return "avx512f";
  if (has_flag(flags, "avx2")) return "avx2";
  return "baseline";
}

nlohmann::json build_facts() {
#if defined(SRKIT_HAVE_MPI)
  const bool mpi = true;
#else
  const bool mpi = false;
#endif
  return {{"version", SRKIT_VERSION},
          {"git_commit", SRKIT_GIT_COMMIT},
          {"git_dirty", SRKIT_GIT_DIRTY},
          {"build_type", SRKIT_BUILD_TYPE},
          {"compiler", SRKIT_BUILD_COMPILER},
          {"arch_flags", SRKIT_BUILD_ARCH_FLAGS},
          {"numerics_flags", SRKIT_BUILD_NUMERICS_FLAGS},
          {"cuda", cuda_facts()},
          {"mpi", mpi}};
}

nlohmann::json host_facts() {
  return {{"cpu_model", cpuinfo_field("model name")},
          {"simd_level", simd_level_from_flags(cpuinfo_field("flags"))},
          {"cpu_isa", cpu::cpu_isa_name(cpu::cpu_isa())},
          {"bf16_gemm", cpu::bf16_gemm_path_name(cpu::bf16_gemm_path())},
          {"logical_cpus", std::thread::hardware_concurrency()},
          {"openmp_threads", omp_get_max_threads()}};
}

std::string build_facts_text() {
  std::string out;
  auto add = [&out](const std::string& prefix, const nlohmann::json& facts) {
    for (const auto& [key, value] : facts.items()) {
      out += prefix + key + ": " + (value.is_string() ? value.get<std::string>() : value.dump()) +
             "\n";
    }
  };
  add("", build_facts());
  add("host ", host_facts());
  return out;
}

}  // namespace srkit
