// Progress lines for long loops: "<what>: done/total <unit> (p%), rate/s, ETA", at most one
// every five seconds, and once at the end.
#pragma once

#include <cstddef>
#include <string>

#include "nabu/core/clock.h"

namespace nabu {

class ProgressReporter {
 public:
  ProgressReporter(std::string what, std::size_t total, std::string unit = "utterances")
      : what_(std::move(what)), unit_(std::move(unit)), total_(total) {}
  void update(std::size_t done);

 private:
  std::string what_, unit_;
  std::size_t total_;
  Clock::time_point start_ = Clock::now();
  double last_ = 0;
  bool ended_ = false;
};

}  // namespace nabu
