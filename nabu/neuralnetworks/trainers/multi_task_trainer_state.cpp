// MultiTaskTrainer's state in and out of checkpoints (multi_task_trainer.h): what a snapshot
// holds, how a checkpoint restores it, and resuming from the latest one.
#include "nabu/neuralnetworks/trainers/multi_task_trainer.h"

#include <cmath>
#include <map>

#include "nabu/core/error.h"
#include "nabu/core/logging.h"

namespace nabu {

nlohmann::json MultiTaskTrainer::model_norms() const {
  std::map<std::string, double> parameters;
  for (const auto& [name, tensor] : bank_->named_parameters())
    parameters[name.substr(0, name.find('.'))] += tensor.detach().pow(2).sum().item<double>();
  auto gradients = update_->last_gradient_norms();
  nlohmann::json norms = nlohmann::json::object();
  for (const auto& [model, square] : parameters) {
    norms[model]["parameters"] = std::sqrt(square);
    auto it = gradients.find(model);
    if (it != gradients.end()) norms[model]["gradients"] = it->second;
  }
  return norms;
}

TrainingCheckpoint MultiTaskTrainer::snapshot(bool finished) const {
  TrainingCheckpoint checkpoint;
  checkpoint.stage = stage_.segment_length;
  checkpoint.num_steps = num_steps_;
  checkpoint.finished = finished;
  checkpoint.state = state_;
  for (const auto& task : tasks_)
    for (const auto& [name, position] : task->positions()) checkpoint.positions[name] = position;
  // On the CPU in the file, wherever the models compute (load_checkpoint maps them back).
  for (const auto& [name, tensor] : bank_->named_parameters())
    checkpoint.parameters[name] = tensor.detach().to(torch::kCPU, /*non_blocking=*/false,
                                                     /*copy=*/true);
  checkpoint.rng_state = rng_state();
  if (settings_.device.is_cuda()) checkpoint.device_rng_state = rng_state(settings_.device);
  if (scaler_.enabled()) {
    checkpoint.loss_scale = scaler_.scale();
    checkpoint.loss_scale_good_steps = scaler_.good_steps();
  }
  return checkpoint;
}

void MultiTaskTrainer::restore(const TrainingCheckpoint& checkpoint) {
  restore_weights(checkpoint);
  StageSchedule::resumed(state_, checkpoint.state);
  for (auto& task : tasks_) task->seek(checkpoint.positions);
  if (checkpoint.rng_state.defined()) set_rng_state(checkpoint.rng_state);
  if (checkpoint.device_rng_state.defined() && settings_.device.is_cuda())
    set_rng_state(checkpoint.device_rng_state, settings_.device);
  if (checkpoint.loss_scale > 0)
    scaler_.restore(checkpoint.loss_scale, checkpoint.loss_scale_good_steps);
}

void MultiTaskTrainer::restore_weights(const TrainingCheckpoint& checkpoint) {
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : bank_->named_parameters()) {
    auto it = checkpoint.parameters.find(name);
    if (it == checkpoint.parameters.end())
      throw Error("checkpoint of stage " + checkpoint.stage + " has no parameter " + name +
                  " (was model.cfg changed?)");
    if (it->second.sizes() != tensor.sizes())
      throw Error("checkpoint parameter " + name + " has another shape (was model.cfg changed?)");
    tensor.copy_(it->second);
  }
}

bool MultiTaskTrainer::resume() {
  if (!settings_.resume) return false;
  std::string note;
  auto checkpoint = checkpointer_->read_resumable(note);
  if (!checkpoint) return false;
  if (!note.empty()) logger().warn("[{}] {}", stage_.segment_length, note);
  restore(*checkpoint);
  logger().info("[{}] resumed at step {} of {}{}", stage_.segment_length, state_.step, num_steps_,
               checkpoint->finished ? " (stage already finished)" : "");
  return checkpoint->finished;
}

}  // namespace nabu
