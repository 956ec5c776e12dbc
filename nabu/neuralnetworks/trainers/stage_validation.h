// The validation of one stage (docs/trainer.md, "Validation"): every validated task is evaluated
// on the same number of batches (the minimum over the tasks, as the original), the task results
// are totalled with the task weights, the ValidationPolicy decides on the chief's numbers (its
// decision broadcast, so every rank follows it bit for bit), and the outcome is reported as one
// metrics record and one log line. What follows the decision (saving, going back, stopping) is the
// trainer's, through its Checkpointer.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nabu/core/recipe.h"
#include "nabu/distributed/communicator.h"
#include "nabu/neuralnetworks/evaluators/evaluator.h"
#include "nabu/neuralnetworks/trainers/stage_schedule.h"
#include "nabu/neuralnetworks/trainers/trainer.h"
#include "nabu/neuralnetworks/trainers/trainer_options.h"
#include "nabu/neuralnetworks/trainers/validation_policy.h"

namespace nabu {

class StageValidation {
 public:
  struct Context {
    const Recipe& recipe;
    const TrainerOptions& options;
    const StageSettings& stage;
    ModelBank& bank;
    StoreCache& stores;
  };
  // What one validation found and decided.
  struct Outcome {
    ValidationDecision decision;
    double total = 0;       // what the tracks were given, weighted over the tasks
    nlohmann::json record;  // metrics.jsonl's validation record, without its seconds
    std::string text;       // the log line, without its seconds
    std::vector<AudioClip> audio;  // the tasks' tensorboard_audio signals
  };

  // Nothing to validate (no validation_evaluator.cfg, `evaluator = None`, every task excluded):
  // nullptr, with one warning line.
  static std::unique_ptr<StageValidation> build(const Context& context);

  // Fresh tracks, one per validated task with validate_per_task, else one for the total.
  ValidationState initial_state() const { return policy_.initial_state(); }
  // Evaluates and decides at state.step; state.validation follows the decision's policy.
  Outcome run(StageState& state, Communicator& communicator);
  // The best validation value (per task with validate_per_task) for the stage's result.
  void report_best(const ValidationState& state, StageResult& result) const;

 private:
  struct Task {
    std::string name;
    double weight = 1.0;  // its weight in the total (options.task_weight of its training task)
    EvaluatorPtr evaluator;
  };
  // A named extra set (extra_validation_sets): evaluated and logged, never selecting.
  struct ExtraSet {
    std::string task, name;
    EvaluatorPtr evaluator;
  };
  // The numbers of one evaluation of every task.
  struct Evaluated {
    std::vector<double> selection;  // per task: the loss, or the metric it selects on
    std::map<std::string, double> losses, metrics;
    // Per task with several linked sets: each set's own loss.
    std::map<std::string, std::map<std::string, double>> set_losses;
    std::string metrics_text;
    double total = 0;
    std::vector<AudioClip> audio;
  };

  StageValidation(const Context& context, ValidationPolicyOptions policy);
  void add_task(const Context& context, const ConfigFile& validation_cfg,
                const ConfigSection& evaluator, const std::string& task);
  Evaluated evaluate(Communicator& communicator);
  ValidationDecision decide(const Evaluated& evaluated, StageState& state,
                            Communicator& communicator) const;
  nlohmann::json evaluate_extra_sets(Communicator& communicator, std::string& text);
  Outcome describe(const Evaluated& evaluated, const ValidationDecision& decision,
                   const StageState& state, Communicator& communicator);

  std::string segment_length_;
  bool per_task_tracks_ = false;  // validate_per_task: one track per task
  ValidationPolicy policy_;
  std::vector<Task> tasks_;
  std::vector<ExtraSet> extra_sets_;
  int64_t batches_ = 0;  // per task: the minimum of the tasks' batch counts
};

}  // namespace nabu
