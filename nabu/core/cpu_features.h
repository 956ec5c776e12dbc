// What this machine's CPU can do, read from /proc/cpuinfo: the one place the project asks, for
// OpenBLAS's kernels (openblas_core.h) and for whether bf16 has instructions behind it
// (mixed_precision.h).
#pragma once

#include <string>

namespace nabu {

// The flags the project's choices depend on. /proc/cpuinfo lists a flag only where the OS also
// saves the registers it needs, so AVX-512 here means usable AVX-512.
struct CpuFeatures {
  bool amd = false;
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx512_bf16 = false, amx_bf16 = false;
};

// The first "flags" line of /proc/cpuinfo, after its colon ("" where there is none).
std::string cpu_flags();
// Whether `flags` (space-separated, as cpu_flags() gives them) holds `flag` as a whole word.
bool has_cpu_flag(const std::string& flags, const std::string& flag);

// From a "flags" line and a vendor_id ("AuthenticAMD", "GenuineIntel").
CpuFeatures cpu_features_from(const std::string& flags, const std::string& vendor_id);
// This machine's.
CpuFeatures cpu_features();

}  // namespace nabu
