// One stage of training (SPEC §2.a MultiTaskTrainer): the tasks' minibatches accumulated over
// numbatches_to_aggregate rounds, one update (or one per task with acc_steps), validation every
// valid_frequency updates through the ValidationPolicy, checkpoints, early stop, and the best
// validated model written to <stage>/model at the end.
#pragma once

#include <csignal>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nabu/core/logging.h"
#include "nabu/core/recipe.h"
#include "nabu/distributed/communicator.h"
#include "nabu/neuralnetworks/evaluators/task_loss_evaluator.h"
#include "nabu/neuralnetworks/trainers/checkpoint.h"
#include "nabu/neuralnetworks/trainers/task_trainer.h"
#include "nabu/neuralnetworks/trainers/trainer_options.h"
#include "nabu/neuralnetworks/trainers/validation_policy.h"

namespace nabu {

struct RunSettings {
  uint64_t seed = 1234;
  bool resume = false;
  int64_t max_steps = -1;  // --max-steps: stop the stage after this many updates; wins over
                           // trainer.cfg's max_steps; -1 = not given
};

struct StageResult {
  bool validated = false;
  double best_validation = 0;
  std::map<std::string, double> best_per_task;
  int64_t steps = 0;
  std::string stop_reason;
};

// Set by SIGINT/SIGTERM: the trainer writes a checkpoint and stops cleanly.
extern volatile std::sig_atomic_t interrupt_requested;

class MultiTaskTrainer {
 public:
  MultiTaskTrainer(const Recipe& recipe, const TrainerOptions& options, const StageSettings& stage,
                   std::filesystem::path stage_dir, std::filesystem::path init_model,
                   Communicator& communicator, RunSettings settings);
  ~MultiTaskTrainer();
  StageResult run();

  ModelBank& bank() { return *bank_; }
  int64_t num_steps() const { return num_steps_; }

 private:
  void build();
  void build_optimizers();
  void build_validation();
  void training_step();
  // Validates, applies the policy; returns false when training must stop.
  bool validate();
  TrainingCheckpoint snapshot(bool finished) const;
  void restore(const TrainingCheckpoint& checkpoint, bool with_validation_state);
  void save(const std::filesystem::path& path, bool finished);
  double current_learning_rate() const;

  const Recipe& recipe_;
  TrainerOptions options_;
  StageSettings stage_;
  std::filesystem::path stage_dir_, init_model_;
  Communicator& communicator_;
  RunSettings settings_;

  std::unique_ptr<ModelBank> bank_;
  StoreCache stores_;
  std::vector<std::unique_ptr<TaskTrainer>> tasks_;
  std::vector<double> task_weights_;
  std::vector<std::unique_ptr<TaskLossEvaluator>> evaluators_;
  std::vector<std::string> validation_tasks_;
  int64_t validation_batches_ = 0;
  std::unique_ptr<ValidationPolicy> policy_;
  ValidationState validation_;

  // Optimizers; in acc_steps mode one per (task, weight group) with its lr factor.
  struct OptimizerSlot {
    std::unique_ptr<torch::optim::Adam> optimizer;
    int task = -1;  // -1: the joint optimizer
    double lr_scale = 1.0;
    std::vector<torch::Tensor> parameters;
  };
  std::vector<OptimizerSlot> optimizers_;
  std::vector<torch::Tensor> all_parameters_;

  int64_t step_ = 0, num_steps_ = 0;
  std::string stop_reason_;
  std::unique_ptr<MetricsWriter> metrics_;  // chief only
  double last_step_seconds_ = 0;
  double last_allreduce_seconds_ = 0;  // of the last update (0 with one process)
  double checkpoint_clock_ = 0;
};

}  // namespace nabu
