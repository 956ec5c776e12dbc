#include "nabu/neuralnetworks/trainers/step_profile.h"

#include <torch/csrc/autograd/profiler_legacy.h>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/experiment_layout.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"

namespace nabu {

PhaseTimes& PhaseTimes::operator+=(const PhaseTimes& other) {
  data += other.data;
  forward += other.forward;
  backward += other.backward;
  allreduce += other.allreduce;
  optimizer += other.optimizer;
  validation += other.validation;
  return *this;
}

nlohmann::json PhaseTimes::to_json() const {
  return {{"data", data},           {"forward", forward},     {"backward", backward},
          {"allreduce", allreduce}, {"optimizer", optimizer}, {"validation", validation}};
}

std::pair<int64_t, int64_t> parse_profile_steps(const std::string& text) {
  if (trim(text).empty()) return {0, 0};
  auto dash = text.find('-');
  auto first = parse_int(trim(text.substr(0, dash)));
  auto last = dash == std::string::npos ? first : parse_int(trim(text.substr(dash + 1)));
  if (!first || !last || *first < 1 || *last < *first)
    throw std::invalid_argument("expected A-B with 1 <= A <= B (update numbers), got '" + text +
                                "'");
  return {*first, *last};
}

// The legacy LibTorch profiler writes a JSON array of Chrome trace events when it is destroyed.
struct StepProfiler::Recorder {
  explicit Recorder(std::ostream& out) : profile(out) {}
  torch::autograd::profiler::RecordProfile profile;
};

StepProfiler::StepProfiler(std::filesystem::path stage_dir, std::pair<int64_t, int64_t> range,
                           bool chief)
    : stage_dir_(std::move(stage_dir)), range_(range), chief_(chief) {}

StepProfiler::~StepProfiler() = default;

void StepProfiler::start() {
  if (!chief_ || recorder_) return;
  recorder_ = std::make_unique<Recorder>(trace_);
}

void StepProfiler::add(const PhaseTimes& phases) {
  if (!recorder_) return;
  sum_ += phases;
  ++updates_;
}

void StepProfiler::finish() {
  if (!recorder_) return;
  recorder_.reset();  // writes the events into trace_
  std::string events = trace_.str();
  if (events.find('[') == std::string::npos) events = "[]";
  auto path = StageLayout{stage_dir_}.profile_dir() /
              ("trace_" + std::to_string(range_.first) + "-" + std::to_string(range_.second) +
               ".json");
  write_file_atomic(path, "{\"traceEvents\": " + events + "}\n");
  const double total = std::max(sum_.total(), 1e-12);
  std::string table = fmt::format("profile of updates {}-{} ({} updates; trace in {}):\n",
                                  range_.first, range_.second, updates_, path.string());
  table += fmt::format("  {:<11} {:>10} {:>12} {:>7}\n", "phase", "total s", "ms/update", "share");
  for (const auto& [name, seconds] :
       std::vector<std::pair<std::string, double>>{{"data wait", sum_.data},
                                                   {"forward", sum_.forward},
                                                   {"backward", sum_.backward},
                                                   {"all-reduce", sum_.allreduce},
                                                   {"optimizer", sum_.optimizer},
                                                   {"validation", sum_.validation}})
    table += fmt::format("  {:<11} {:>10.3f} {:>12.2f} {:>6.1f}%\n", name, seconds,
                         1000.0 * seconds / std::max<int64_t>(updates_, 1), 100.0 * seconds / total);
  logger().info("{}", table.substr(0, table.size() - 1));
}

}  // namespace nabu
