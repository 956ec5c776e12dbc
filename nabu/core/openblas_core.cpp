#include "nabu/core/openblas_core.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace nabu {

namespace {

// Set for the restarted program only: the kernel set OpenBLAS had chosen before.
constexpr const char* kRestartedFrom = "NABU_OPENBLAS_RESTARTED_FROM";

}  // namespace

std::string openblas_core() {
  // Looked up rather than linked: LibTorch reaches OpenBLAS through libblas.so.3, and other
  // builds have no OpenBLAS at all.
  using CoreName = const char* (*)();
  auto name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* core = name ? name() : nullptr;
  return core ? core : "";
}

std::string openblas_core_for(const std::string& detected, const CpuFeatures& cpu) {
  if (detected != "Prescott" || !cpu.avx2 || !cpu.fma) return "";
  const bool skylake_x = cpu.avx512f && cpu.avx512bw && cpu.avx512dq && cpu.avx512vl;
  if (skylake_x) return cpu.avx512_bf16 ? "Cooperlake" : "SkylakeX";
  return cpu.amd ? "Zen" : "Haswell";
}

void restart_for_openblas_core(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv(kRestartedFrom)) return;
  const std::string detected = openblas_core();
  if (detected != "Prescott") return;  // spares reading /proc/cpuinfo at every start
  const std::string wanted = openblas_core_for(detected, cpu_features());
  if (wanted.empty()) return;
  setenv("OPENBLAS_CORETYPE", wanted.c_str(), 1);
  setenv(kRestartedFrom, detected.c_str(), 1);
  execv("/proc/self/exe", argv);
  // Still here: the program runs on as it is, with the slow kernels, and says so.
  std::cerr << "nabu: could not restart with OPENBLAS_CORETYPE=" << wanted << " ("
            << std::strerror(errno) << "); fp32 matrix products use OpenBLAS's generic "
            << detected << " kernels (set OPENBLAS_CORETYPE yourself)\n";
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kRestartedFrom);
}

std::string take_openblas_restart_note() {
  const char* from = std::getenv(kRestartedFrom);
  if (!from) return "";
  std::string note = std::string("OpenBLAS took this CPU for ") + from +
                     " (a model it has no entry for); nabu restarted with OPENBLAS_CORETYPE=" +
                     openblas_core() + " (set OPENBLAS_CORETYPE to choose)";
  // The workers nabu train starts inherit OPENBLAS_CORETYPE; the note is the chief's to give.
  unsetenv(kRestartedFrom);
  return note;
}

std::string blas_description() {
  const std::string core = openblas_core();
  if (core.empty()) return "not OpenBLAS (LibTorch's own)";
  std::string text = "OpenBLAS, " + core + " kernels";
  const char* asked = std::getenv("OPENBLAS_CORETYPE");
  const char* from = std::getenv(kRestartedFrom);
  if (asked && from)
    text += std::string(" (set by nabu: OpenBLAS took this CPU for ") + from + ")";
  else if (asked)
    text += std::string(" (OPENBLAS_CORETYPE=") + asked + ")";
  return text;
}

}  // namespace nabu
