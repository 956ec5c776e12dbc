// The update rule of one training step (docs/trainer.md, "One update"): each task's accumulated
// gradient is divided by its loss norm, multiplied (gradient_multipliers), clipped element-wise
// and checked for NaN/Inf; then either one optimizer step with the task-weighted sum (the
// default), or one step per task and weight group in task order (update_per_task). Which task
// parameter feeds which optimizer slot is worked out once, at construction.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nabu/neuralnetworks/trainers/trainer_options.h"

namespace nabu {

// The names among `named` that trainer.cfg's freeze_parameters patterns match (searched anywhere
// in the name). A pattern that matches no name is a ConfigError naming the key.
std::vector<std::string> frozen_parameter_names(
    const OptimizerOptions& options, const ConfigSection& trainer_section,
    const std::vector<std::pair<std::string, torch::Tensor>>& named);

// torch::optim::Adam's update computed with multi-tensor (_foreach) kernels: about eight kernels
// per step for all parameters of a group, where torch::optim::Adam launches about eight per
// parameter, which on a GPU cost more than the arithmetic for models of a few hundred small
// tensors (docs/results.md, "GPUs"). Same options, state and
// checkpoints, and on the CPU the same operations in the same order per parameter: its results
// are Adam's to the bit (test MultiTensorAdam.MatchesTorchAdamToTheBit). With
// set_tensorflow_epsilon(true), epsilon is added to sqrt(v) before the bias correction, as
// tf.train.AdamOptimizer does (MultiTensorAdam.TensorFlowEpsilonPlacementIsTheFormulaWrittenOut).
class MultiTensorAdam : public torch::optim::Adam {
 public:
  using torch::optim::Adam::Adam;
  torch::Tensor step(LossClosure closure = nullptr) override;
  void set_tensorflow_epsilon(bool on) { tensorflow_epsilon_ = on; }

 private:
  bool tensorflow_epsilon_ = false;
};

class ParameterUpdate {
 public:
  struct Task {
    std::string name;
    double weight = 1.0;
    std::vector<torch::Tensor> parameters;  // the order of the task's gradients
  };
  // What a task accumulated in one step.
  struct TaskSums {
    double loss = 0, norm = 0;
    std::vector<torch::Tensor>* gradients = nullptr;  // aligned with Task::parameters
  };

  // `named`: the parameters that may be updated, by name, in a fixed order (the bank's); every
  // task parameter must be among them, and none that freeze_parameters matches (the trainer
  // takes those out of the tasks; one left in is an Error). Throws ConfigError naming the key
  // when a freeze_parameters or gradient_multipliers pattern matches no parameter.
  // `reports`: log_norms, print_var_updates and print_grads_stats.
  ParameterUpdate(const OptimizerOptions& options, const ProfilingOptions& reports,
                  const ConfigSection& trainer_section,
                  double initial_learning_rate,
                  const std::vector<std::pair<std::string, torch::Tensor>>& named,
                  std::vector<Task> tasks);

  // One update. `failure_hint` ends the message of a NaN/Inf error (where the best model is).
  void apply(const std::vector<TaskSums>& sums, double learning_rate, int64_t step,
             const std::string& failure_hint);

  // With log_norms: per model (the parameter name up to its first '.'), the norm of the gradient the
  // last update applied (after multipliers and clipping); empty otherwise.
  std::map<std::string, double> last_gradient_norms() const;

  // In a fixed order, for checkpoints.
  std::vector<torch::optim::Optimizer*> optimizers() const;
  // Every parameter some task updates, in the order of `named`.
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }

  // The optimizer `options.optimizer` over `parameters` (exposed for the benchmarks and tests).
  static std::unique_ptr<torch::optim::Optimizer> make_optimizer(
      const OptimizerOptions& options, std::vector<torch::Tensor> parameters, double learning_rate);

 private:
  struct Slot {
    std::unique_ptr<torch::optim::Optimizer> optimizer;
    int task = -1;  // -1: the joint optimizer
    double lr_scale = 1.0;
    std::vector<torch::Tensor> parameters;
    std::vector<std::size_t> task_indices;  // update_per_task: the task gradient of each parameter
  };
  // Steps of the constructor: parameters_, parameter_names_ and joint_index_ from the `used`
  // ones of `named`; multipliers_ (gradient_multipliers); slots_ (one optimizer, or one per
  // task and weight group).
  void index_parameters(const std::vector<std::pair<std::string, torch::Tensor>>& named,
                        const std::vector<bool>& used);
  void set_multipliers(const ConfigSection& trainer_section,
                       const std::vector<std::pair<std::string, torch::Tensor>>& named,
                       const std::vector<bool>& used);
  void make_slots(double initial_learning_rate);
  void prepare_gradients(const Task& task, const TaskSums& sums, int64_t step,
                         const std::string& failure_hint) const;
  void clip_norm(std::vector<torch::Tensor>& gradients) const;
  // print_grads_stats and print_var_updates: the original's debug lines for update `step` + 1.
  void log_gradient_stats(const std::vector<std::pair<std::size_t, torch::Tensor>>& applied,
                          int64_t step) const;
  void log_variable_updates(const std::vector<torch::Tensor>& before, int64_t step) const;

  OptimizerOptions options_;
  ProfilingOptions reports_;
  std::vector<Task> tasks_;
  std::vector<torch::Tensor> parameters_;
  std::vector<std::string> parameter_names_;  // aligned with parameters_
  std::vector<double> gradient_squares_;      // log_norms: per parameter, of the last update
  // joint mode: for task t and its parameter i, the index into parameters_
  std::vector<std::vector<std::size_t>> joint_index_;
  // per task and parameter: the gradient multiplier (empty when none is configured)
  std::vector<std::vector<double>> multipliers_;
  std::vector<Slot> slots_;
};

}  // namespace nabu
