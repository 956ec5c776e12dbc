// A task section (trainer.cfg, validation_evaluator.cfg or test_evaluator.cfg; docs/trainer.md,
// §1.6, §1.7, §2.c): which database sections feed which input and target names, the node graph, the
// loss, and the evaluator's batch settings.
#pragma once

#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/pipeline/batch.h"

namespace nabu {

enum class TaskRole { kTrain, kValidation, kTest };

// A linked set: the same task fed by another group of sections, with a loss weight.
struct LinkedSet {
  std::string name = "set0";
  double weight = 1.0;
  std::vector<DataBinding> inputs, targets;
};

struct TaskSpec {
  std::string name;
  TaskRole role = TaskRole::kTrain;
  std::vector<std::string> input_names, target_names, output_names, nodes;
  std::vector<LinkedSet> linked_sets;  // at least one
  std::string loss_type;
  double trainset_frac = 1.0;
  int requested_utts = -1;  // evaluators: from the task section, else [evaluator]
  int batch_size = -1;
  // Validation: the stores it reads, the training stage's ("stage", as the original) or whole
  // utterances in every stage ("full"); from the task section, else [evaluator].
  std::string validation_segments = "stage";
};

// Parses a task section; `evaluator` is the [evaluator] section for the fallbacks of
// requested_utts and batch_size (may be nullptr). Throws ConfigError naming the key.
TaskSpec read_task_spec(const ConfigSection& section, TaskRole role,
                        const ConfigSection* evaluator = nullptr);

// One line per database.conf section that `spec` reads in a training stage of `segment_lengths`
// but that does not store that length (naming its segment_lengths key). A training task reads its
// inputs, and its targets too unless `dynamic_mixing` computes them; a validation task with
// validation_segments = stage reads both; test tasks and validation on whole utterances read no
// stage's length. Missing or unprocessed sections are left to their own checks.
std::vector<std::string> unstored_segment_lengths(const TaskSpec& spec, const ConfigFile& database,
                                                  const std::vector<std::string>& segment_lengths,
                                                  bool dynamic_mixing);

// Keys of the task section that no rule explains, each a message with "did you mean".
std::vector<std::string> unknown_task_keys(const ConfigSection& section, TaskRole role);

}  // namespace nabu
