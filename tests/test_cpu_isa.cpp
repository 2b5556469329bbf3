// The choice of instruction set (kernels/cpu/cpu_isa.h): SRKIT_CPU_ISA's rule,
// its errors, and the override tests use. That each ISA gives the same bits is
// tested where the bits are made: tests/test_philox.cpp (the batches against
// the contract), tests/test_cast_cpu.cpp (the SR cast) and
// tests/test_trainer.cpp (a whole run).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_isa.h"

namespace srkit::cpu {
namespace {

TEST(CpuIsa, AutoTakesAvx512WhereTheCpuHasIt) {
  EXPECT_EQ(parse_cpu_isa(nullptr, true), CpuIsa::kAvx512);
  EXPECT_EQ(parse_cpu_isa(nullptr, false), CpuIsa::kAvx2);
  EXPECT_EQ(parse_cpu_isa("", true), CpuIsa::kAvx512);
  EXPECT_EQ(parse_cpu_isa("auto", true), CpuIsa::kAvx512);
  EXPECT_EQ(parse_cpu_isa("auto", false), CpuIsa::kAvx2);
}

TEST(CpuIsa, ExplicitChoices) {
  EXPECT_EQ(parse_cpu_isa("avx2", true), CpuIsa::kAvx2);
  EXPECT_EQ(parse_cpu_isa("avx2", false), CpuIsa::kAvx2);
  EXPECT_EQ(parse_cpu_isa("avx512", true), CpuIsa::kAvx512);
  EXPECT_STREQ(cpu_isa_name(CpuIsa::kAvx2), "avx2");
  EXPECT_STREQ(cpu_isa_name(CpuIsa::kAvx512), "avx512");
}

TEST(CpuIsa, BadValuesAreOneLineErrors) {
  try {
    parse_cpu_isa("avx512", false);
    FAIL() << "avx512 without AVX-512 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "SRKIT_CPU_ISA=avx512, but this CPU lacks AVX-512 F/BW/VL/DQ (use auto or avx2)");
  }
  try {
    parse_cpu_isa("AVX512", true);  // names are lower case, as printed
    FAIL() << "an unknown name was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "SRKIT_CPU_ISA='AVX512' is not an instruction set (expected auto, avx2 or avx512)");
  }
}

TEST(CpuIsa, ScopedOverrideRestoresThePreviousChoice) {
  const CpuIsa before = cpu_isa();
  {
    const ScopedCpuIsa forced(CpuIsa::kAvx2);
    EXPECT_EQ(cpu_isa(), CpuIsa::kAvx2);
    if (cpu_has_avx512()) {
      const ScopedCpuIsa inner(CpuIsa::kAvx512);
      EXPECT_EQ(cpu_isa(), CpuIsa::kAvx512);
    } else {
      EXPECT_THROW(ScopedCpuIsa{CpuIsa::kAvx512}, std::invalid_argument);
    }
    EXPECT_EQ(cpu_isa(), CpuIsa::kAvx2);
  }
  EXPECT_EQ(cpu_isa(), before);
  EXPECT_EQ(runnable_cpu_isas().size(), cpu_has_avx512() ? 2u : 1u);
}

}  // namespace
}  // namespace srkit::cpu
