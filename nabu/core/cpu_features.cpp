#include "nabu/core/cpu_features.h"

#include <algorithm>
#include <fstream>
#include <vector>

#include "nabu/core/strings.h"

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
  const auto words = split_whitespace(flags);
  return std::find(words.begin(), words.end(), flag) != words.end();
}

CpuFeatures cpu_features_from(const std::string& flags, const std::string& vendor_id) {
  const auto words = split_whitespace(flags);  // split once, not once per flag
  auto has = [&](const char* flag) {
    return std::find(words.begin(), words.end(), flag) != words.end();
  };
  CpuFeatures cpu;
  cpu.amd = vendor_id.find("AuthenticAMD") != std::string::npos;
  cpu.avx2 = has("avx2");
  cpu.fma = has("fma");
  cpu.avx512f = has("avx512f");
  cpu.avx512bw = has("avx512bw");
  cpu.avx512dq = has("avx512dq");
  cpu.avx512vl = has("avx512vl");
  cpu.avx512_bf16 = has("avx512_bf16");
  cpu.amx_bf16 = has("amx_bf16");
  return cpu;
}

CpuFeatures cpu_features() { return cpu_features_from(cpu_flags(), cpuinfo_value("vendor_id")); }

}  // namespace nabu
