// Where the time of an update goes (docs/trainer.md, "Profiling"): every update's phases (data
// wait, forward with the loss, backward, all-reduce, optimizer, and the validation that ran
// before it) go to metrics.jsonl; `profile_steps = A-B` also records a Chrome trace of those
// updates (LibTorch's profiler, <stage>/profile/trace_<A>-<B>.json, {"traceEvents": [...]}) and
// logs a table of the phases over them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace nabu {

struct PhaseTimes {
  double data = 0, forward = 0, backward = 0, allreduce = 0, optimizer = 0, validation = 0;
  PhaseTimes& operator+=(const PhaseTimes& other);
  double total() const { return data + forward + backward + allreduce + optimizer + validation; }
  nlohmann::json to_json() const;
};

// "A-B" (1 <= A <= B: update numbers) or "" (off); throws ConfigError-free std::invalid_argument
// with the reason for anything else.
std::pair<int64_t, int64_t> parse_profile_steps(const std::string& text);

class StepProfiler {
 public:
  // Updates `range` (numbered from 1) are profiled: the StageSchedule says when the first is
  // about to run (start) and when the last has run (finish). Only the chief records.
  StepProfiler(std::filesystem::path stage_dir, std::pair<int64_t, int64_t> range, bool chief);
  ~StepProfiler();
  void start();
  bool recording() const { return recorder_ != nullptr; }
  // While recording: the phases of an update that ran.
  void add(const PhaseTimes& phases);
  // Writes the trace and logs the table.
  void finish();

 private:
  std::filesystem::path stage_dir_;
  std::pair<int64_t, int64_t> range_;
  bool chief_;
  PhaseTimes sum_;
  int64_t updates_ = 0;
  std::ostringstream trace_;
  struct Recorder;
  std::unique_ptr<Recorder> recorder_;
};

}  // namespace nabu
