// openblas_core.h: which OpenBLAS kernels the nabu program asks for, and that it gets them;
// cpu_features.h: the CPU features those choices (and bf16's warning) are made from.
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

TEST(CpuFeatures, AreWholeFlagsOfTheCpuinfoLineAndAgreeWithTheProcessorItself) {
  // An excerpt of an Emerald Rapids guest's line (family 6 model 207, no AMX exposed).
  const std::string xeon = " fpu sse2 avx fma avx2 avx512f avx512dq avx512cd avx512bw avx512vl "
                           "avx512_bf16 avx512_fp16 ";
  const CpuFeatures intel = cpu_features_from(xeon, " GenuineIntel");
  EXPECT_FALSE(intel.amd);
  EXPECT_TRUE(intel.avx2 && intel.fma && intel.avx512f && intel.avx512bw && intel.avx512dq &&
              intel.avx512vl && intel.avx512_bf16);
  EXPECT_FALSE(intel.amx_bf16);
  EXPECT_EQ(openblas_core_for("Prescott", intel), "Cooperlake");
  const CpuFeatures amd = cpu_features_from("fpu avx2 fma amx_bf16", " AuthenticAMD");
  EXPECT_TRUE(amd.amd && amd.avx2 && amd.amx_bf16);
  EXPECT_FALSE(amd.avx512f);
  // A flag is a whole word: neither part of a longer one nor the compiler's spelling.
  EXPECT_FALSE(has_cpu_flag("xavx2x avx2_vnni avx512bf16", "avx2"));
  EXPECT_FALSE(cpu_features_from("avx512bf16", "").avx512_bf16);
  EXPECT_TRUE(has_cpu_flag("\tavx2\tfma", "fma"));
  EXPECT_FALSE(has_cpu_flag("", "fma"));

  // This machine: what /proc/cpuinfo lists agrees with the processor's own answer (cpuid, as
  // the compiler's builtins ask it).
  const CpuFeatures here = cpu_features();
  EXPECT_TRUE(has_cpu_flag(cpu_flags(), "sse2")) << cpu_flags();
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  EXPECT_EQ(here.amd, static_cast<bool>(__builtin_cpu_is("amd")));
  EXPECT_EQ(here.avx2, static_cast<bool>(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(here.fma, static_cast<bool>(__builtin_cpu_supports("fma")));
  EXPECT_EQ(here.avx512f, static_cast<bool>(__builtin_cpu_supports("avx512f")));
  EXPECT_EQ(here.avx512bw, static_cast<bool>(__builtin_cpu_supports("avx512bw")));
  EXPECT_EQ(here.avx512_bf16, static_cast<bool>(__builtin_cpu_supports("avx512bf16")));
#endif
}

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
