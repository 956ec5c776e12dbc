// Which of OpenBLAS's kernel sets LibTorch's fp32 matrix products run on, and the restart that
// corrects it on CPUs OpenBLAS does not know.
#pragma once

#include <string>

#include "nabu/core/cpu_features.h"

namespace nabu {

// The kernel set the loaded OpenBLAS chose ("Haswell", "Cooperlake", "Prescott"...); empty when
// the products do not go through OpenBLAS (the wheel's LibTorch, another BLAS).
std::string openblas_core();

// The OPENBLAS_CORETYPE to ask for, or "" to keep OpenBLAS's choice. A DYNAMIC_ARCH OpenBLAS
// takes a CPU model it has no table entry for as "Prescott", its SSE3 kernels: Debian's 0.3.21
// does so on Intel's 5th-generation Xeons (family 6 model 207), where the DC toy recipe's fp32
// update then takes 2.5x as long (docs/results.md, "OpenBLAS on CPUs it does not know"). Only
// that fallback is corrected, by the best set the features allow; any other choice is OpenBLAS's.
std::string openblas_core_for(const std::string& detected, const CpuFeatures& cpu);

// Called first by the nabu program: when OPENBLAS_CORETYPE is unset and openblas_core_for names
// a kernel set, runs the program again (same process, execv of /proc/self/exe) with it set;
// OpenBLAS reads it only when it is loaded. A failed restart leaves things as they were.
void restart_for_openblas_core(char** argv);

// After such a restart: one line saying what was done, once (empty otherwise and afterwards).
std::string take_openblas_restart_note();

// For nabu --version: the BLAS line ("OpenBLAS, Cooperlake kernels ...").
std::string blas_description();

}  // namespace nabu
