// openblas_core.h: which OpenBLAS kernels the nabu program asks for, and that it gets them.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "nabu/core/openblas_core.h"
#include "test_helpers.h"

namespace nabu::testing {
namespace {

CpuFeatures avx2_cpu(bool amd) {
  CpuFeatures cpu;
  cpu.amd = amd;
  cpu.avx2 = cpu.fma = true;
  return cpu;
}

CpuFeatures avx512_cpu(bool bf16) {
  CpuFeatures cpu = avx2_cpu(false);
  cpu.avx512f = cpu.avx512bw = cpu.avx512dq = cpu.avx512vl = true;
  cpu.avx512_bf16 = bf16;
  return cpu;
}

// The kernel set `nabu --version` reports ("" when the products do not go through OpenBLAS).
std::string reported_core(const CommandResult& version) {
  std::smatch found;
  static const std::regex line("BLAS: OpenBLAS, (\\S+) kernels");
  return std::regex_search(version.output, found, line) ? found[1].str() : "";
}

}  // namespace

TEST(OpenblasCore, OnlyTheGenericFallbackIsReplacedByTheBestKernelsTheCpuRuns) {
  // Emerald Rapids, as Debian's OpenBLAS 0.3.21 sees it: Prescott on a CPU with avx512_bf16.
  EXPECT_EQ(openblas_core_for("Prescott", avx512_cpu(true)), "Cooperlake");
  EXPECT_EQ(openblas_core_for("Prescott", avx512_cpu(false)), "SkylakeX");
  EXPECT_EQ(openblas_core_for("Prescott", avx2_cpu(false)), "Haswell");
  EXPECT_EQ(openblas_core_for("Prescott", avx2_cpu(true)), "Zen");
  // AVX-512 without all of BW, DQ and VL is not what SkylakeX's kernels need.
  CpuFeatures partial = avx512_cpu(false);
  partial.avx512bw = false;
  EXPECT_EQ(openblas_core_for("Prescott", partial), "Haswell");
  // A CPU without AVX2 and FMA is rightly on the generic kernels.
  CpuFeatures old = avx2_cpu(false);
  old.fma = false;
  EXPECT_EQ(openblas_core_for("Prescott", old), "");
  EXPECT_EQ(openblas_core_for("Prescott", CpuFeatures{}), "");
  // A choice of OpenBLAS's own, or no OpenBLAS, is kept.
  for (const std::string detected : {"Haswell", "Zen", "SkylakeX", "Cooperlake", ""})
    EXPECT_EQ(openblas_core_for(detected, avx512_cpu(true)), "") << detected;
}

TEST(OpenblasCore, TheProgramRunsOnKernelsForItsCpuAndKeepsAKernelSetTheUserAsksFor) {
  const auto version = run_nabu("--version");
  ASSERT_EQ(version.exit_code, 0) << version.output;
  if (openblas_core().empty()) {
    EXPECT_NE(version.output.find("BLAS: not OpenBLAS"), std::string::npos) << version.output;
    GTEST_SKIP() << "this build's matrix products do not go through OpenBLAS";
  }
  const CpuFeatures cpu = cpu_features();
  const std::string core = reported_core(version);
  ASSERT_FALSE(core.empty()) << version.output;
  if (cpu.avx2 && cpu.fma) {
    EXPECT_NE(core, "Prescott") << version.output;
  }

  const auto asked = run_shell("OPENBLAS_CORETYPE=Prescott '" + std::string(NABU_BINARY) +
                                   "' --version",
                               fs::current_path());
  ASSERT_EQ(asked.exit_code, 0) << asked.output;
  EXPECT_EQ(reported_core(asked), "Prescott") << asked.output;
  EXPECT_NE(asked.output.find("(OPENBLAS_CORETYPE=Prescott)"), std::string::npos)
      << asked.output;
}

}  // namespace nabu::testing
