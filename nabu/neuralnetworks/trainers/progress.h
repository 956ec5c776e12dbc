// What a stage reports while it trains: a console line when the StageSchedule says (loss,
// learning rate, s/step, examples/s, ETA), one JSON object per update and per validation in
// <stage>/metrics.jsonl, and every number of those records as a TensorBoard scalar in
// tensorboard/<stage>/ (core/tensorboard.h). Only the chief reports; on the other ranks every
// call does nothing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nabu/core/logging.h"
#include "nabu/core/tensorboard.h"

namespace nabu {

class TrainingProgress {
 public:
  struct Step {
    int64_t step = 0;
    std::vector<std::pair<std::string, double>> task_losses;  // normalised, in task order
    double loss = 0;  // sum of task_weight * task loss
    double learning_rate = 0;
    double seconds = 0, allreduce_seconds = 0;
    int64_t examples = 0, frames = 0;
    nlohmann::json extra;  // more fields for the metrics line (may be null)
  };

  // `metrics_path` empty: this rank reports nothing; `tensorboard_dir` empty: no event files.
  TrainingProgress(std::string stage, const std::filesystem::path& metrics_path,
                   std::filesystem::path tensorboard_dir = {});
  bool enabled() const { return metrics_ != nullptr; }
  // The first update of this run (after a resume: the step it resumed at) and the last one
  // (the epoch total or a max_steps cap): progress lines count and estimate up to `limit`. Opens
  // this run's event file: TensorBoard drops what an earlier run logged after `first_step`.
  void start(int64_t first_step, int64_t limit);
  // The update's metrics record, and with `line` its console line.
  void step(const Step& step, bool line);
  // A validation line and record; `record` gets "type" and "stage" added.
  void validation(nlohmann::json record, const std::string& line);
  // Any other record for metrics.jsonl (profiles, exports); gets "stage" added.
  void record(nlohmann::json record);
  // TensorBoard audio at `step` (validation_evaluator.cfg's tensorboard_audio).
  void audio(int64_t step, const std::vector<AudioClip>& clips);
  // TensorBoard histograms at `step` (log_norms: every parameter at each validation), by tag.
  void histograms(int64_t step,
                  const std::vector<std::pair<std::string, std::vector<double>>>& values);

 private:
  std::string stage_;
  int64_t first_step_ = 0, limit_ = 0;
  double started_ = 0;
  std::unique_ptr<MetricsWriter> metrics_;
  std::filesystem::path tensorboard_dir_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  // The record to metrics.jsonl, and its numbers to TensorBoard at its step.
  void write(const nlohmann::json& record);
};

}  // namespace nabu
