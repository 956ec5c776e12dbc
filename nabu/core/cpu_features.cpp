#include "nabu/core/cpu_features.h"

#include <fstream>
#include <sstream>

namespace nabu {

namespace {

// The value of the first /proc/cpuinfo line starting with `key` ("" where there is none).
std::string cpuinfo_value(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? "" : line.substr(colon + 1);
    }
  return "";
}

}  // namespace

std::string cpu_flags() { return cpuinfo_value("flags"); }

bool has_cpu_flag(const std::string& flags, const std::string& flag) {
  std::istringstream words(flags);
  for (std::string word; words >> word;)
    if (word == flag) return true;
  return false;
}

CpuFeatures cpu_features_from(const std::string& flags, const std::string& vendor_id) {
  CpuFeatures cpu;
  cpu.amd = vendor_id.find("AuthenticAMD") != std::string::npos;
  cpu.avx2 = has_cpu_flag(flags, "avx2");
  cpu.fma = has_cpu_flag(flags, "fma");
  cpu.avx512f = has_cpu_flag(flags, "avx512f");
  cpu.avx512bw = has_cpu_flag(flags, "avx512bw");
  cpu.avx512dq = has_cpu_flag(flags, "avx512dq");
  cpu.avx512vl = has_cpu_flag(flags, "avx512vl");
  cpu.avx512_bf16 = has_cpu_flag(flags, "avx512_bf16");
  cpu.amx_bf16 = has_cpu_flag(flags, "amx_bf16");
  return cpu;
}

CpuFeatures cpu_features() { return cpu_features_from(cpu_flags(), cpuinfo_value("vendor_id")); }

}  // namespace nabu
