// The gradients of one training task (docs/trainer.md; the original calls it TaskTrainer, though
// it trains nothing: the ParameterUpdate does): its pipelines (one per linked set), graph and
// loss. A minibatch adds the gradient of its (weighted, unnormalised) loss to the task's
// accumulators, only for the parameters of the models the task uses.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nabu/neuralnetworks/trainers/step_profile.h"
#include "nabu/core/config.h"
#include "nabu/core/recipe.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/neuralnetworks/models/model_bank.h"
#include "nabu/neuralnetworks/models/model_graph.h"
#include "nabu/neuralnetworks/task_definition.h"
#include "nabu/neuralnetworks/kernels/mixed_precision.h"
#include "nabu/neuralnetworks/trainers/trainer_options.h"
#include "nabu/pipeline/example_set.h"
#include "nabu/pipeline/input_pipeline.h"

namespace nabu {

class TaskGradients {
 public:
  TaskGradients(const ConfigSection& section, const ConfigFile* loss_cfg, const Recipe& recipe,
              const DataOptions& data, const StageSettings& stage, ModelBank& bank,
              StoreCache& stores, int rank, int world_size, uint64_t seed, bool pin_memory);

  const std::string& name() const { return spec_.name; }
  const TaskSpec& spec() const { return spec_; }
  std::set<std::string> used_models() const { return graph_->used_models(); }
  // Trainable parameters of the models this task uses, in a fixed order.
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }
  // Examples per epoch of the (last) linked set, for num_steps (docs/trainer.md).
  int64_t num_examples() const { return num_examples_; }
  // Builds the lazily created parameters with one forward pass on a real example.
  void materialize();
  // Stops computing gradients for these parameters (frozen ones).
  void exclude(const std::vector<torch::Tensor>& parameters);

  // trainer.cfg precision: the forward passes under autocast (outputs back to fp32 for the loss).
  void set_precision(Precision precision) { precision_ = precision; }
  // clip_grad_value_per_minibatch: each minibatch's gradient is clamped to +-value before it is
  // added to the accumulators (0: not clamped here).
  void set_minibatch_clip(double value) { minibatch_clip_ = value; }

  void reset_accumulators();
  // One minibatch of every linked set, on the bank's device: forward, loss, gradients added to
  // the accumulators. The gradients are those of loss_scale x loss (fp16's loss scale); the loss
  // sums are not scaled.
  void run_minibatch(double loss_scale = 1.0);
  // Data wait, forward (with the loss) and backward time since reset_accumulators().
  const PhaseTimes& times() const { return times_; }
  double loss_sum() const { return loss_sum_; }
  double norm_sum() const { return norm_sum_; }
  int64_t examples_seen() const { return examples_; }
  int64_t frames_seen() const { return frames_; }
  // Accumulated gradients, aligned with parameters() (undefined = no contribution).
  std::vector<torch::Tensor>& gradients() { return gradients_; }
  // Sets the accumulated sums (after an all-reduce over ranks).
  void set_sums(double loss, double norm) { loss_sum_ = loss, norm_sum_ = norm; }

  std::map<std::string, PipelinePosition> positions() const;
  void seek(const std::map<std::string, PipelinePosition>& positions);

 private:
  struct SetPipeline {
    LinkedSet set;
    std::unique_ptr<InputPipeline> pipeline;
  };
  TaskSpec spec_;
  PhaseTimes times_;
  std::unique_ptr<ModelGraph> graph_;
  LossPtr loss_;
  Precision precision_ = Precision::kFp32;
  double minibatch_clip_ = 0;
  std::vector<SetPipeline> pipelines_;
  std::vector<torch::Tensor> parameters_, gradients_;
  int64_t num_examples_ = 0;
  double loss_sum_ = 0, norm_sum_ = 0;
  int64_t examples_ = 0, frames_ = 0;
};

}  // namespace nabu
