// Evaluators compute a task's loss over a fixed set of batches with training off (no input noise,
// no dropout): validation during training and the test loss (docs/trainer.md, "Validation").
// They are made by name through evaluator_registry(), from the task section's `evaluator` key
// (or the [evaluator] section's); the original has one, task_loss_evaluator. A
// `validation_metric` other than loss selects metric_evaluator (postprocessing/), which also
// scores the reconstructed signals or decoded labels.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/recipe.h"
#include "nabu/core/registry.h"
#include "nabu/core/tensorboard.h"
#include "nabu/distributed/communicator.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/neuralnetworks/models/model_bank.h"
#include "nabu/neuralnetworks/models/model_graph.h"
#include "nabu/neuralnetworks/task_definition.h"
#include "nabu/pipeline/example_set.h"

namespace nabu {

struct EvaluationResult {
  double loss = 0, norm = 0;  // sums over batches (and ranks)
  int64_t batches = 0, examples = 0;
  // With several linked sets: each set's own loss / norm, unweighted, by set name; the total
  // above mixes them by their weights and hides which one moved.
  std::map<std::string, double> set_values;
  // With validation_metric (metric_evaluator): its name, and its sum and count over the scored
  // utterances (for error_rate: errors over reference tokens).
  std::string metric;
  double metric_sum = 0, metric_count = 0;
  bool higher_is_better = true;
  // The separated signals (and, at the run's first validation, the references) of the first
  // tensorboard_audio utterances; on the chief only.
  std::vector<AudioClip> audio;

  double value() const { return norm != 0 ? loss / norm : 0.0; }
  double metric_value() const { return metric_count != 0 ? metric_sum / metric_count : 0.0; }
  // What validation minimises: the loss, or the metric (negated when higher is better).
  double selection_value() const {
    if (metric.empty()) return value();
    return higher_is_better ? -metric_value() : metric_value();
  }
};

// What an evaluator is built from.
struct EvaluatorContext {
  const ConfigSection& section;    // the task section of validation/test_evaluator.cfg
  TaskRole role;                   // kValidation or kTest
  const ConfigSection* evaluator;  // its [evaluator] section (batch_size fallbacks), may be null
  const Recipe& recipe;
  std::string segment_length;  // the stores to read ("100", "full", ...)
  ModelBank& bank;
  LossPtr loss;
  StoreCache& stores;
  int prefetch = 2;
};

class Evaluator {
 public:
  // The batch and the outputs are on the models' device (ModelBank::device).
  using BatchCallback = std::function<void(const Batch&, const TensorMap& outputs)>;
  virtual ~Evaluator() = default;
  virtual const TaskSpec& spec() const = 0;
  virtual ModelGraph& graph() = 0;
  // Whole batches available.
  virtual int64_t num_batches() const = 0;
  // Evaluates the first `max_batches` batches (-1: all) in order. With a communicator of
  // several ranks, rank r takes batches r, r+W, ... and the sums are all-reduced. `on_batch`
  // receives every batch this rank evaluated with the model outputs.
  virtual EvaluationResult evaluate(int64_t max_batches = -1,
                                    Communicator* communicator = nullptr,
                                    const BatchCallback& on_batch = {}) = 0;
};

using EvaluatorPtr = std::unique_ptr<Evaluator>;
using EvaluatorRegistry = Registry<EvaluatorPtr, const EvaluatorContext&>;
EvaluatorRegistry& evaluator_registry();

// The evaluator type of a task: its section's `evaluator` key, else metric_evaluator when
// `validation_metric` (of the task section, else of [evaluator]) is not loss, else the [evaluator]
// section's (unless that names the multi-task wrapper, `multi_task`), else task_loss_evaluator. An unknown
// name is a ConfigError naming file:line and key.
std::string evaluator_type(const ConfigSection& section, const ConfigSection* evaluator);
// The values validation_metric takes: loss, sdr, si_sdr, error_rate.
const std::vector<std::string>& validation_metrics();
// The validation_metric of a validation task section (its own, else its [evaluator] section's,
// else loss); ConfigError naming file:line and key for a value validation_metrics() lacks.
std::string validation_metric_of(const ConfigSection& section, const ConfigSection* evaluator);
EvaluatorPtr make_evaluator(const EvaluatorContext& context);

// The training tasks that are validated: all but validation_evaluator.cfg's
// tasks_excluded_for_val (of its [evaluator] section), in training order; none with
// `evaluator = None`. The trainer and `nabu check` both ask this.
std::vector<std::string> validated_tasks(const ConfigSection& evaluator,
                                         const std::vector<std::string>& training_tasks);

}  // namespace nabu
