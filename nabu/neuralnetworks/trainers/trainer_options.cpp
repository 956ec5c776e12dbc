#include "nabu/neuralnetworks/trainers/trainer_options.h"

#include "nabu/core/error.h"
#include "nabu/core/strings.h"

namespace nabu {

void TrainerOptions::declare(OptionsReader& r) {
  r("trainer", trainer, "trainer type; only multi_task exists (as in the original)");
  r("tasks", tasks, "space-separated task names; each is a section of this file");
  r("segment_lengths", segment_lengths,
    "curriculum: one training stage per value (frames, or full), each initialised from the "
    "previous stage's best model; must end with full");
  r("num_epochs", num_epochs, "passes over the training data per stage (sets num_steps)");
  r("max_steps", max_steps,
    "per segment length (or one value): stop the stage after this many updates, -1 = no "
    "limit; the learning rate still decays over num_steps; --max-steps overrides it (new)");
  r("initial_learning_rate", initial_learning_rate, "per segment length");
  r("learning_rate_decay", learning_rate_decay,
    "per segment length (or one value): total exponential decay over the stage");
  r("clip_grad_value", clip_grad_value, "element-wise gradient clipping");
  r("clip_grad_norm", clip_grad_norm, "global gradient-norm clipping (0 = off; new)");
  r("normalize_gradients", normalize_gradients, "divide gradients by the task's loss norm");
  r("batch_size", batch_size, "per segment length: examples per minibatch");
  r("numbatches_to_aggregate", numbatches_to_aggregate,
    "per segment length: minibatches accumulated per update");
  r("numbuckets", numbuckets, "length buckets for batching (1 = none)");
  r("shuffle", shuffle, "shuffle the examples every epoch (new; False = the original's order)");
  r("valid_frequency", valid_frequency, "updates between validations (first one at step 0)");
  r("valid_adapt", valid_adapt, "halve the learning rate when validation gets worse");
  r("go_back", go_back, "go back to the last validated model when validation gets worse");
  r("num_tries", num_tries,
    "non-improving validations before stopping (None = never stop early)");
  r("reset_tries", reset_tries, "reset the count of tries when validation improves");
  r("task_weights", task_weights, "one weight per task (default 1)");
  r("acc_steps", acc_steps, "one optimizer step per task, applied in task order");
  r("normalize_weights_acc_steps", normalize_weights_acc_steps,
    "with acc_steps: divide each task's weight by the summed weights of the tasks sharing a "
    "parameter");
  r("init_file", init_file, "model file to initialise the first stage from (partial load)");
  r("checkpoint_every", checkpoint_every, "minutes between checkpoints besides validations");
  r("progress_every", progress_every, "updates between progress lines");
  r("prefetch", prefetch, "batches prepared ahead by the background loader");
  r.accepted("print_var_updates", "debug printing of variable updates");
  r.accepted("print_grads_stats", "debug printing of gradient statistics");
}

void TrainerOptions::validate(const ConfigSection& section) const {
  if (trainer != "multi_task")
    section.fail("trainer", "unknown trainer '" + trainer + "'; known: multi_task");
  if (tasks.empty()) section.fail("tasks", "lists no tasks");
  if (segment_lengths.empty()) section.fail("segment_lengths", "is empty");
  for (const auto& segment : segment_lengths)
    if (segment != "full" && (!parse_int(segment) || *parse_int(segment) <= 0))
      section.fail("segment_lengths", "'" + segment + "' is neither a positive integer nor full");
  if (segment_lengths.back() != "full")
    section.fail("segment_lengths", "must end with full (testing uses the full stage's model)");
  std::size_t stages = segment_lengths.size();
  auto check_count = [&](const std::string& key, std::size_t count, bool broadcast) {
    if (count == stages || (broadcast && count == 1)) return;
    section.fail(key, "has " + std::to_string(count) + " values but segment_lengths has " +
                          std::to_string(stages));
  };
  check_count("batch_size", batch_size.size(), false);
  check_count("numbatches_to_aggregate", numbatches_to_aggregate.size(), false);
  check_count("initial_learning_rate", initial_learning_rate.size(), false);
  check_count("learning_rate_decay", learning_rate_decay.size(), true);
  check_count("max_steps", max_steps.size(), true);
  for (int value : max_steps)
    if (value < -1) section.fail("max_steps", "must be -1 (no limit) or a number of updates");
  for (int value : batch_size)
    if (value <= 0) section.fail("batch_size", "must be positive");
  for (int value : numbatches_to_aggregate)
    if (value < 0) section.fail("numbatches_to_aggregate", "must not be negative");
  if (num_epochs <= 0) section.fail("num_epochs", "must be positive");
  if (valid_frequency <= 0) section.fail("valid_frequency", "must be positive");
  if (numbuckets <= 0) section.fail("numbuckets", "must be positive");
  if (!task_weights.empty() && task_weights.size() != tasks.size())
    section.fail("task_weights", "needs one weight per task (" + std::to_string(tasks.size()) +
                                     ")");
  if (num_tries != "None" && (!parse_int(num_tries) || *parse_int(num_tries) <= 0))
    section.fail("num_tries", "expected a positive integer or None, got '" + num_tries + "'");
  if (clip_grad_value <= 0) section.fail("clip_grad_value", "must be positive");
  if (clip_grad_norm < 0) section.fail("clip_grad_norm", "must not be negative");
  if (prefetch < 1) section.fail("prefetch", "must be at least 1");
}

StageSettings TrainerOptions::stage(std::size_t index) const {
  StageSettings stage;
  stage.index = static_cast<int>(index);
  stage.segment_length = segment_lengths.at(index);
  stage.batch_size = batch_size.at(index);
  // SPEC §2.a: numbatches_to_aggregate == 0 means one minibatch per update.
  stage.numbatches_to_aggregate = std::max(1, numbatches_to_aggregate.at(index));
  stage.initial_learning_rate = initial_learning_rate.at(index);
  stage.learning_rate_decay =
      learning_rate_decay.size() == 1 ? learning_rate_decay[0] : learning_rate_decay.at(index);
  stage.max_steps = max_steps.size() == 1 ? max_steps[0] : max_steps.at(index);
  return stage;
}

int TrainerOptions::max_tries() const {
  return num_tries == "None" ? -1 : static_cast<int>(*parse_int(num_tries));
}

double TrainerOptions::task_weight(std::size_t task_index) const {
  return task_weights.empty() ? 1.0 : task_weights.at(task_index);
}

TrainerOptions read_trainer_options(const ConfigFile& trainer_cfg) {
  const ConfigSection& section = trainer_cfg.section("trainer");
  auto options = read_options<TrainerOptions>(section, "[trainer] of trainer.cfg");
  options.validate(section);
  return options;
}

}  // namespace nabu
