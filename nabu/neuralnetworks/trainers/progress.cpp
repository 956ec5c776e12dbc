#include "nabu/neuralnetworks/trainers/progress.h"

#include <chrono>
#include <cmath>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/clock.h"

namespace nabu {

TrainingProgress::TrainingProgress(std::string stage, const std::filesystem::path& metrics_path,
                                   std::filesystem::path tensorboard_dir)
    : stage_(std::move(stage)) {
  if (metrics_path.empty()) return;
  metrics_ = std::make_unique<MetricsWriter>(metrics_path);
  tensorboard_dir_ = std::move(tensorboard_dir);
}

void TrainingProgress::write(const nlohmann::json& record) {
  metrics_->write(record);
  if (tensorboard_ && record.contains("step") && record["step"].is_number_integer())
    tensorboard_->scalars(record_scalars(record), record["step"].get<int64_t>());
}

void TrainingProgress::start(int64_t first_step, int64_t limit) {
  // The next update is first_step + 1: what earlier runs logged from there on is trained again.
  if (metrics_ && !tensorboard_dir_.empty())
    tensorboard_ = std::make_unique<TensorBoardWriter>(tensorboard_dir_, first_step + 1);
  first_step_ = first_step;
  limit_ = limit;
  started_ = now_seconds();
}

void TrainingProgress::step(const Step& step, bool line) {
  if (!metrics_) return;
  nlohmann::json task_losses = nlohmann::json::object();
  for (const auto& [name, value] : step.task_losses) task_losses[name] = value;
  nlohmann::json record{{"type", "train"},
                        {"stage", stage_},
                        {"step", step.step},
                        {"loss", step.loss},
                        {"task_losses", task_losses},
                        {"lr", step.learning_rate},
                        {"seconds", step.seconds},
                        {"examples", step.examples},
                        {"frames", step.frames},
                        {"allreduce_seconds", step.allreduce_seconds}};
  if (step.extra.is_object())
    for (const auto& [key, value] : step.extra.items()) record[key] = value;
  write(record);
  if (!line) return;
  double elapsed = now_seconds() - started_;
  double per_step = elapsed / std::max<int64_t>(1, step.step - first_step_);
  std::string tasks_text;
  if (step.task_losses.size() > 1)
    for (const auto& [name, value] : step.task_losses)
      tasks_text += fmt::format(" {} {:.4g}", name, value);
  // Out of the steps this run really takes (a --max-steps cap), not the stage's epoch total.
  logger().info("[{}] step {}/{} loss {:.5g}{} lr {:.3g} {:.2f} s/step {:.1f} ex/s ETA {}", stage_,
               step.step, limit_, step.loss, tasks_text, step.learning_rate, per_step,
               step.examples / std::max(step.seconds, 1e-9),
               format_duration(per_step * (limit_ - step.step)));
}

void TrainingProgress::validation(nlohmann::json record, const std::string& line) {
  if (!metrics_) return;
  logger().info("{}", line);
  record["type"] = "validation";
  record["stage"] = stage_;
  write(record);
}

void TrainingProgress::audio(int64_t step, const std::vector<AudioClip>& clips) {
  if (!tensorboard_) return;
  for (const auto& clip : clips) tensorboard_->audio(clip.tag, step, clip.samples, clip.sample_rate);
}

void TrainingProgress::histograms(
    int64_t step, const std::vector<std::pair<std::string, std::vector<double>>>& values) {
  if (!tensorboard_) return;
  for (const auto& [tag, numbers] : values) tensorboard_->histogram(tag, step, numbers);
}

void TrainingProgress::record(nlohmann::json record) {
  if (!metrics_) return;
  record["stage"] = stage_;
  write(record);
}

}  // namespace nabu
