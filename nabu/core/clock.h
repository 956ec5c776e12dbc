// Wall-clock helpers shared by everything that times or reports progress: a monotonic clock,
// seconds since a point, and durations as people read them in progress lines ("4m05s").
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>

namespace nabu {

using Clock = std::chrono::steady_clock;

// Seconds on the monotonic clock (only differences mean anything).
inline double now_seconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// "45s", "4m05s", "2h07m"; "?" for a negative or infinite duration (an ETA not known yet).
std::string format_duration(double seconds);

}  // namespace nabu
