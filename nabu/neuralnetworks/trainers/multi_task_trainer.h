// The loop of one stage (docs/trainer.md, the original's MultiTaskTrainer): every update runs
// numbatches_to_aggregate rounds of one minibatch per task (TaskGradients), sums the tasks' sums
// over the ranks, and hands them to the ParameterUpdate. The StageSchedule says when anything
// happens (validate, checkpoint, export, report, profile, stop); StageValidation evaluates and
// decides (through the ValidationPolicy) what follows a validation (halve the learning rate, go
// back, stop); the Checkpointer writes and reads what makes every update resumable;
// TrainingProgress reports. At the end the best validated model is written to
// <stage>/model.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nabu/core/experiment_layout.h"
#include "nabu/neuralnetworks/trainers/checkpointer.h"
#include "nabu/neuralnetworks/trainers/fault_injection.h"
#include "nabu/neuralnetworks/trainers/step_profile.h"
#include "nabu/neuralnetworks/trainers/parameter_update.h"
#include "nabu/neuralnetworks/trainers/progress.h"
#include "nabu/neuralnetworks/trainers/stage_schedule.h"
#include "nabu/neuralnetworks/trainers/stage_validation.h"
#include "nabu/neuralnetworks/trainers/task_gradients.h"
#include "nabu/neuralnetworks/trainers/trainer.h"

namespace nabu {

class MultiTaskTrainer : public StageTrainer {
 public:
  explicit MultiTaskTrainer(const StageContext& context);
  ~MultiTaskTrainer() override;
  StageResult run() override;

  ModelBank& bank() { return *bank_; }
  int64_t num_steps() const { return num_steps_; }

 private:
  void build();
  // The tasks' gradient accumulation, their parameter update, and what they freeze.
  void build_update(const ConfigSection& trainer_section);
  // The updates num_epochs give: the minimum over the tasks.
  void count_steps();
  StageScheduleSettings schedule_settings() const;
  // The latest checkpoint when resuming; returns whether the stage had already finished.
  bool resume();
  void training_step();
  // fp16: unscales the summed gradients; false (logged) when they or a loss overflowed and the
  // update must be skipped. Without fp16: true.
  bool gradients_finite();
  // What follows an update: its report, and whatever the schedule says is due.
  void after_update();
  // The run's stop request (settings_.stop; 0 without one).
  int stop_signal() const { return settings_.stop ? settings_.stop->signal() : 0; }
  // A signal (the stop request) on any rank: the chief writes a checkpoint and every rank
  // throws Interrupted, all after the same update.
  void stop_if_interrupted();
  // The best validated model becomes the stage's model; the result for val_sum.json.
  StageResult finish();
  StageOutcome outcome(int64_t best_step) const;
  void report_outcome(const StageOutcome& outcome);
  // The one place gradients cross ranks: every task's gradients, loss and norm summed over the
  // ranks, with whether a rank was signalled (interrupt_agreed_).
  void all_reduce_sums();
  // Validates and follows the decision; returns false when training must stop.
  bool validate();
  // Every parameter's TensorBoard histogram at this step (histogram_steps, log_norms).
  void write_histograms();
  // The decision of a validation: halve, keep the validated state, stop, go back.
  bool follow(const ValidationDecision& decision, double total);
  void go_back(bool halve_lr);
  // Per model: the norm of its parameters and of the gradient the last update applied.
  nlohmann::json model_norms() const;
  // Everything of a checkpoint: weights, step, validation state, data positions, random state.
  TrainingCheckpoint snapshot(bool finished) const;
  Checkpointer::Snapshot snapshot_now(bool finished) const {
    return [this, finished] { return snapshot(finished); };
  }
  void restore(const TrainingCheckpoint& checkpoint);
  void restore_weights(const TrainingCheckpoint& checkpoint);
  double current_learning_rate() const;
  StageLayout layout() const { return {stage_dir_}; }

  const Recipe& recipe_;
  const TrainerOptions& options_;
  StageSettings stage_;
  std::filesystem::path stage_dir_, init_model_;
  Communicator& communicator_;
  RunSettings settings_;
  FaultInjection faults_;

  std::unique_ptr<ModelBank> bank_;
  Precision precision_ = Precision::kFp32;
  LossScaler scaler_;  // fp16 only
  StoreCache stores_;
  std::vector<std::unique_ptr<TaskGradients>> tasks_;
  std::vector<double> task_weights_;
  std::unique_ptr<StageValidation> validation_;  // null: the stage does not validate
  std::unique_ptr<StageSchedule> schedule_;
  StageState state_;
  std::unique_ptr<ParameterUpdate> update_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<TrainingProgress> progress_;
  std::unique_ptr<StepProfiler> profiler_;
  PhaseTimes last_phases_;                // of the last update
  double pending_validation_seconds_ = 0;  // validation before the next update

  int64_t num_steps_ = 0;
  std::string stop_reason_;
  double last_step_seconds_ = 0;
  double last_learning_rate_ = 0;  // the rate the last update applied (metrics.jsonl's lr)
  double last_allreduce_seconds_ = 0;  // of the last update (0 with one process)
  // Distributed: a rank had been signalled when the last update's sums were all-reduced, so
  // every rank stops after the same update.
  bool interrupt_agreed_ = false;
};

}  // namespace nabu
