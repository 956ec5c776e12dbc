// task_loss_evaluator: Σloss / Σnorm of a task over the evaluator's batches (docs/trainer.md,
// "Validation"): the first min(N, requested_utts) examples, a whole number of batches, in order.
// Validation and test both use it; the test also receives every batch's outputs to reconstruct
// the signals.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nabu/neuralnetworks/evaluators/evaluator.h"
#include "nabu/pipeline/task_pipeline.h"

namespace nabu {

class TaskLossEvaluator : public Evaluator {
 public:
  explicit TaskLossEvaluator(const EvaluatorContext& context);

  const TaskSpec& spec() const override { return spec_; }
  ModelGraph& graph() override { return *graph_; }
  int64_t num_batches() const override { return num_batches_; }
  EvaluationResult evaluate(int64_t max_batches = -1, Communicator* communicator = nullptr,
                            const BatchCallback& on_batch = {}) override;

 private:
  struct SetData {
    LinkedSet set;
    double weight;
    std::unique_ptr<TaskPipeline> pipeline;
  };
  TaskSpec spec_;
  std::unique_ptr<ModelGraph> graph_;
  LossPtr loss_;
  std::vector<SetData> sets_;
  int64_t num_batches_ = 0;
  int prefetch_;
};

}  // namespace nabu
