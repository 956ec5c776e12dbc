// task_loss_evaluator (SPEC §2.d): Σloss / Σnorm of a task over the evaluator's batches, with
// training off (no input noise, no dropout). Validation and test both use it; the test command
// also receives every batch's outputs to reconstruct the signals.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/distributed/communicator.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/neuralnetworks/models/model_bank.h"
#include "nabu/neuralnetworks/models/model_graph.h"
#include "nabu/neuralnetworks/trainers/task_spec.h"
#include "nabu/pipeline/example_set.h"

namespace nabu {

struct EvaluationResult {
  double loss = 0, norm = 0;  // sums over batches (and ranks)
  int64_t batches = 0, examples = 0;
  double value() const { return norm != 0 ? loss / norm : 0.0; }
};

class TaskLossEvaluator {
 public:
  using BatchCallback = std::function<void(const Batch&, const TensorMap& outputs)>;

  // `section`: the task section of validation_evaluator.cfg or test_evaluator.cfg;
  // `evaluator`: its [evaluator] section (requested_utts / batch_size fallbacks).
  TaskLossEvaluator(const ConfigSection& section, TaskRole role, const ConfigSection* evaluator,
                    const ConfigFile& database, const std::string& segment_length,
                    ModelBank& bank, LossPtr loss, StoreCache& stores, int prefetch = 2);

  const TaskSpec& spec() const { return spec_; }
  ModelGraph& graph() { return *graph_; }
  // Whole batches available (requested_utts rule, min over linked sets).
  int64_t num_batches() const { return num_batches_; }
  // Evaluates the first `max_batches` batches (-1: all) in order. With a communicator of
  // several ranks, rank r takes batches r, r+W, ... and the sums are all-reduced.
  EvaluationResult evaluate(int64_t max_batches = -1, Communicator* communicator = nullptr,
                            const BatchCallback& on_batch = {});

 private:
  struct SetData {
    LinkedSet set;
    double weight;
    std::shared_ptr<ExampleSet> examples;
  };
  TaskSpec spec_;
  std::unique_ptr<ModelGraph> graph_;
  LossPtr loss_;
  std::vector<SetData> sets_;
  int64_t num_batches_ = 0;
  int prefetch_;
};

// Model inputs of a batch (bool/int data as float) and their sequence lengths.
TensorMap model_inputs(const Batch& batch, const std::vector<std::string>& input_names);
// Targets of a batch by name.
TensorMap batch_targets(const Batch& batch, const std::vector<std::string>& target_names);

}  // namespace nabu
