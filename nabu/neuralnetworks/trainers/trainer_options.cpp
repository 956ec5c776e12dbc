#include "nabu/neuralnetworks/trainers/trainer_options.h"

#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nabu/core/device.h"
#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/trainers/step_profile.h"

namespace nabu {

namespace {

// "regex:factor" -> (regex, factor); the factor is after the last ':' so a pattern may hold ':'.
std::optional<std::pair<std::string, double>> parse_multiplier(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  auto factor = parse_double(text.substr(colon + 1));
  if (!factor) return std::nullopt;
  return std::make_pair(text.substr(0, colon), *factor);
}

bool valid_regex(const std::string& pattern) {
  try {
    std::regex compiled(pattern);
    return true;
  } catch (const std::regex_error&) {
    return false;
  }
}

}  // namespace

void TrainerOptions::declare(OptionsReader& r) {
  r.choice("trainer", trainer, {"multi_task"},
           "trainer type; only multi_task exists (as in the original)");
  r("tasks", tasks, "space-separated task names; each is a section of this file");
  r("segment_lengths", segment_lengths,
    "curriculum: one training stage per value (frames, or full), each initialised from the "
    "previous stage's best model; must end with full");
  schedule.declare(r);
  learning_rate.declare(r);
  optimizer.declare(r);
  data.declare(r);
  profiling.declare(r);
  compute.declare(r);
  r("task_weights", task_weights, "one weight per task (default 1)");
  r.choice("task_loss_combination", task_loss_combination, {"sum", "mean"},
           "how the task losses make the trained loss and the validation total: sum = the "
           "task_weights-weighted sum (Nabu-MSSS), mean = the same divided by the summed weights "
           "(the older single-loss trainer's unweighted mean over tasks)");
  r("init_file", init_file,
    "model file to initialise the first stage from (partial load): a model.pt, or an HDF5 "
    "file of parameters (tools/convert_tf_checkpoint makes one of an original checkpoint)");

  // Rules across groups: the per-stage lists have one value per segment length.
  r.require(!tasks.empty(), "tasks", "lists no tasks");
  r.require(!segment_lengths.empty(), "segment_lengths", "is empty");
  for (const auto& segment : segment_lengths)
    r.require(segment == "full" || (parse_int(segment) && *parse_int(segment) > 0),
              "segment_lengths", "'" + segment + "' is neither a positive integer nor full");
  r.require(segment_lengths.empty() || segment_lengths.back() == "full", "segment_lengths",
            "must end with full (testing uses the full stage's model)");
  std::size_t stages = segment_lengths.size();
  auto check_count = [&](const std::string& key, std::size_t count, bool broadcast) {
    r.require(count == stages || (broadcast && count == 1), key,
              "has " + std::to_string(count) + " values but segment_lengths has " +
                  std::to_string(stages));
  };
  check_count("batch_size", data.batch_size.size(), false);
  check_count("numbatches_to_aggregate", data.numbatches_to_aggregate.size(), false);
  check_count("initial_learning_rate", learning_rate.initial_learning_rate.size(), false);
  check_count("learning_rate_decay", learning_rate.learning_rate_decay.size(), true);
  check_count("max_steps", schedule.max_steps.size(), true);
  r.require(task_weights.empty() || task_weights.size() == tasks.size(), "task_weights",
            "needs one weight per task (" + std::to_string(tasks.size()) + ")");
}

void StageScheduleOptions::declare(OptionsReader& r) {
  r("num_epochs", num_epochs, "passes over the training data per stage (sets num_steps)");
  r("max_steps", max_steps,
    "per segment length (or one value): stop the stage after this many updates, -1 = no "
    "limit; the learning rate still decays over num_steps, except a cosine, which anneals over "
    "these updates; --max-steps overrides it (new)");
  r("valid_frequency", valid_frequency, "updates between validations (first one at step 0)");
  r("valid_every_seconds", valid_every_seconds,
    "also validate when this many seconds of training passed since the last validation, "
    "whichever of this and valid_frequency comes first (0 = off; new). The time is the chief's, "
    "kept in the checkpoint, so a resumed run validates where it would have");
  r("valid_start_step", valid_start_step,
    "no validation before this update, except at the stage's last (0 = from step 0; new, as "
    "Estimator's start delay)");
  r("valid_min_seconds", valid_min_seconds,
    "at most one validation per this many seconds of training, however often valid_frequency "
    "asks (0 = off; new, as Estimator's throttle); the first and the last are not held back");
  r("max_train_minutes", max_train_minutes,
    "stop a stage after this many minutes of training (the chief's clock, validations not "
    "counted, kept in the checkpoint; 0 = no budget; new)");
  r("valid_adapt", valid_adapt, "halve the learning rate when validation gets worse");
  r("go_back", go_back,
    "go back to the last validated weights, optimizer state and learning-rate factor when "
    "validation gets worse (the data order moves on)");
  r("num_tries", num_tries,
    "non-improving validations before stopping (None = never stop early)");
  r("reset_tries", reset_tries, "reset the count of tries when validation improves");
  r("checkpoint_every", checkpoint_every, "minutes between checkpoints besides validations");
  r("checkpoint_every_steps", checkpoint_every_steps,
    "also write a checkpoint every N updates (0 = off; new)");
  r("average_checkpoints", average_checkpoints,
    "keep the N best validated models of each stage in <stage>/model/best/ and write their "
    "average as <stage>/model/model_avg.pt (nabu test --model=avg; 0 = off; new)");
  r("export_every", export_every,
    "write a loadable model every N updates to <stage>/model/export/model_step<N>.pt (0 = off; "
    "new)");
  r("keep_checkpoint_every_hours", keep_checkpoint_every_hours,
    "keep a copy of latest.pt in <stage>/logdir/kept/ every H hours of training (0 = off; new, "
    "as TensorFlow's Saver)");
  r("progress_every", progress_every, "updates between progress lines");

  for (int value : max_steps)
    r.require(value >= -1, "max_steps", "must be -1 (no limit) or a number of updates");
  r.require(num_epochs > 0, "num_epochs", "must be positive");
  r.require(valid_frequency > 0, "valid_frequency", "must be positive");
  r.require(valid_every_seconds >= 0, "valid_every_seconds", "must not be negative (0 = off)");
  r.require(valid_start_step >= 0, "valid_start_step", "must not be negative");
  r.require(valid_min_seconds >= 0, "valid_min_seconds", "must not be negative (0 = off)");
  r.require(max_train_minutes >= 0, "max_train_minutes", "must not be negative (0 = none)");
  r.require(checkpoint_every >= 0, "checkpoint_every", "must not be negative (0 = off)");
  r.require(checkpoint_every_steps >= 0, "checkpoint_every_steps",
            "must not be negative (0 = off)");
  r.require(average_checkpoints >= 0, "average_checkpoints", "must not be negative (0 = off)");
  r.require(export_every >= 0, "export_every", "must not be negative (0 = off)");
  r.require(keep_checkpoint_every_hours >= 0, "keep_checkpoint_every_hours",
            "must not be negative (0 = off)");
  r.require(num_tries == "None" || (parse_int(num_tries) && *parse_int(num_tries) > 0),
            "num_tries", "expected a positive integer or None, got '" + num_tries + "'");
}

void LearningRateOptions::declare(OptionsReader& r) {
  r("initial_learning_rate", initial_learning_rate, "per segment length");
  r("learning_rate_decay", learning_rate_decay,
    "per segment length (or one value): total exponential decay over the stage "
    "(lr_schedule = exponential only)");
  r.choice("lr_schedule", lr_schedule, {"exponential", "step", "cosine", "noam"},
           "new: exponential (initial * learning_rate_decay^(step/num_steps), the original's), "
           "step (initial * lr_step_factor^floor(step/lr_step_size)), cosine (half a cosine "
           "from initial to lr_min over num_steps, or over max_steps when that ends the stage "
           "sooner) or noam (initial * min(n/W, sqrt(W/n)) for "
           "the n-th update, W = warmup_steps: peaks at initial at update W); every schedule "
           "is multiplied by the halving of valid_adapt (docs/trainer.md)");
  r("warmup_steps", warmup_steps,
    "new: the learning rate rises linearly from 0 over a stage's first N updates (update n "
    "gets n/N of the schedule's value; 0 = off); noam's own warmup, which it requires");
  r("lr_step_size", lr_step_size, "new: lr_schedule = step: updates per stair (required)");
  r("lr_step_factor", lr_step_factor,
    "new: lr_schedule = step: the learning rate is multiplied by this every lr_step_size "
    "updates");
  r("lr_min", lr_min,
    "new: lr_schedule = cosine: the learning rate at the stage's last update (num_steps or "
    "max_steps)");

  // A key of another schedule set to anything but its default is an error, not silently ignored
  // (the defaults, as config/defaults and the stage's trainer.cfg write them, pass).
  auto only_for = [&](const std::string& key, bool set, const std::string& schedule) {
    r.require(!set || lr_schedule == schedule, key,
              "applies only to lr_schedule = " + schedule + " (lr_schedule is " + lr_schedule +
                  ")");
  };
  only_for("lr_step_size", lr_step_size != 0, "step");
  only_for("lr_step_factor", lr_step_factor != 0.1, "step");
  only_for("lr_min", lr_min != 0, "cosine");
  for (double decay : learning_rate_decay)
    only_for("learning_rate_decay", decay != 1.0, "exponential");
  r.require(warmup_steps >= 0, "warmup_steps", "must not be negative (0 = off)");
  r.require(lr_schedule != "noam" || warmup_steps > 0, "warmup_steps",
            "lr_schedule = noam needs warmup_steps > 0 (the update at which it peaks)");
  r.require(lr_schedule != "step" || lr_step_size > 0, "lr_step_size",
            "lr_schedule = step needs lr_step_size > 0 (updates per stair)");
  r.require(lr_step_factor > 0, "lr_step_factor", "must be positive");
  r.require(lr_min >= 0, "lr_min", "must not be negative");
  for (double initial : initial_learning_rate)
    r.require(lr_schedule != "cosine" || lr_min <= initial, "lr_min",
              "must not exceed initial_learning_rate");
}

void OptimizerOptions::declare(OptionsReader& r) {
  r.choice("optimizer", optimizer, {"adam", "adamw", "sgd", "rmsprop"},
           "the update rule (new; the original always uses adam)");
  r("adam_beta1", adam_beta1, "adam/adamw: decay of the first moment");
  r("adam_beta2", adam_beta2, "adam/adamw: decay of the second moment");
  r("adam_epsilon", adam_epsilon, "adam/adamw: added to the root of the second moment");
  r.choice("adam_epsilon_placement", adam_epsilon_placement, {"libtorch", "tensorflow"},
           "adam: libtorch adds adam_epsilon to the bias-corrected root sqrt(v/(1-beta2^t)) (the "
           "Adam paper, LibTorch, PyTorch); tensorflow adds it to sqrt(v) before the correction, "
           "as tf.train.AdamOptimizer in the original (the same as libtorch with epsilon x "
           "sqrt(1-beta2^t): larger steps while v is small, in the first ~1/(1-beta2) updates)");
  r("momentum", momentum, "sgd/rmsprop: momentum (0 = none)");
  r("weight_decay", weight_decay,
    "L2 penalty added to the gradient (adam, sgd, rmsprop) or decoupled decay (adamw)");
  r("rmsprop_decay", rmsprop_decay, "rmsprop: decay of the squared-gradient average (TF's 0.9)");
  r("rmsprop_epsilon", rmsprop_epsilon, "rmsprop: added to the root of that average");
  r("clip_grad_value", clip_grad_value, "element-wise gradient clipping");
  r("clip_grad_norm", clip_grad_norm, "global gradient-norm clipping (0 = off; new)");
  r("clip_grad_value_per_minibatch", clip_grad_value_per_minibatch,
    "clamp each minibatch's gradient to clip_grad_value before it is added to the step's sum "
    "(the older trainer, seed 001), instead of clamping the normalised sum (Nabu-MSSS)");
  r("clip_grad_norm_per_tensor", clip_grad_norm_per_tensor,
    "clip_grad_norm bounds the norm of each tensor (seed 003, slim's clip_gradient_norms) "
    "instead of the global norm of all of them");
  r("normalize_gradients", normalize_gradients, "divide gradients by the task's loss norm");
  r("acc_steps", acc_steps,
    "the original's switch for two things, each also a key of its own: update_per_task and "
    "validate_per_task (True sets both)");
  r("update_per_task", update_per_task,
    "one optimizer step per task, applied in task order with learning rate x task weight (the "
    "original's acc_steps), instead of one step with the weighted sum of the task gradients");
  r("validate_per_task", validate_per_task,
    "one validation track per validated task (each task's own loss decides improvement, "
    "halving and stopping; the stage keeps the best of each; the original's acc_steps) instead "
    "of one track for the weighted total");
  r("normalize_weights_acc_steps", normalize_weights_acc_steps,
    "with update_per_task: divide each task's weight by the summed weights of the tasks "
    "sharing a parameter");
  r("freeze_parameters", freeze_parameters,
    "space-separated regular expressions over parameter names (<model>.<parameter>, as nabu "
    "list and the model files name them; a pattern matches anywhere unless anchored with ^ $): "
    "matching parameters are not updated; a pattern that matches nothing is an error");
  r("gradient_multipliers", gradient_multipliers,
    "space-separated regex:factor pairs: the normalised gradient of every matching parameter "
    "is multiplied by factor before clipping (the first matching pair applies)");

  r.require(clip_grad_value > 0, "clip_grad_value", "must be positive");
  r.require(clip_grad_norm >= 0, "clip_grad_norm", "must not be negative");
  r.require(adam_beta1 >= 0 && adam_beta1 < 1, "adam_beta1", "must lie in [0, 1)");
  r.require(adam_beta2 >= 0 && adam_beta2 < 1, "adam_beta2", "must lie in [0, 1)");
  r.require(adam_epsilon > 0, "adam_epsilon", "must be positive");
  r.require(adam_epsilon_placement == "libtorch" || optimizer == "adam", "adam_epsilon_placement",
            "tensorflow applies only to optimizer = adam (optimizer is " + optimizer + ")");
  // acc_steps = True is the original's name for both; a contradicting key is not ignored.
  const ConfigSection* section = r.section();
  using Half = std::pair<std::string, bool*>;
  for (const auto& [key, value] :
       {Half{"update_per_task", &update_per_task}, Half{"validate_per_task", &validate_per_task}}) {
    r.require(!acc_steps || *value || !section || !section->has(key), key,
              "is False but acc_steps = True sets it (acc_steps means update_per_task and "
              "validate_per_task; leave acc_steps out and set the one wanted)");
    if (acc_steps) *value = true;
  }
  r.require(momentum >= 0, "momentum", "must not be negative");
  r.require(weight_decay >= 0, "weight_decay", "must not be negative");
  r.require(rmsprop_decay >= 0 && rmsprop_decay < 1, "rmsprop_decay", "must lie in [0, 1)");
  r.require(rmsprop_epsilon > 0, "rmsprop_epsilon", "must be positive");
  for (const auto& pattern : freeze_parameters)
    r.require(valid_regex(pattern), "freeze_parameters",
              "'" + pattern + "' is not a valid regular expression");
  for (const auto& text : gradient_multipliers) {
    auto pair = parse_multiplier(text);
    r.require(pair.has_value(), "gradient_multipliers",
              "'" + text + "' is not regex:factor (e.g. ^main\\.:0.5)");
    if (pair)
      r.require(valid_regex(pair->first), "gradient_multipliers",
                "'" + pair->first + "' is not a valid regular expression");
  }
}

void ProfilingOptions::declare(OptionsReader& r) {
  r("profile_steps", profile_steps,
    "A-B: a Chrome trace of updates A to B in <stage>/profile/ and a table of where their time "
    "went (data wait, forward, backward, all-reduce, optimizer, validation) in the log (new)");
  r("log_norms", log_norms,
    "per-model parameter and applied-gradient norms in metrics.jsonl, plotted by "
    "tools/plot_metrics (new)");
  r("histogram_steps", histogram_steps,
    "every N updates, the distribution of every parameter tensor as a TensorBoard histogram "
    "(parameters/<model>.<parameter>; 0 = none, as the original since 2020; its 2017-2020 "
    "versions wrote them with every summary; log_norms adds one at each validation)");
  r("print_var_updates", print_var_updates,
    "after every update, the log's lines of the original: the mean absolute change of each "
    "trained tensor x 1e4, and their mean");
  r("print_grads_stats", print_grads_stats,
    "after every update, the log's lines of the original: min, max, mean and standard deviation "
    "of the absolute applied gradient, over all trained tensors and per tensor");

  r.require(histogram_steps >= 0, "histogram_steps", "must not be negative (0 = none)");
  try {
    parse_profile_steps(profile_steps);
  } catch (const std::invalid_argument& e) {
    r.require(false, "profile_steps", e.what());
  }
}

void ComputeOptions::declare(OptionsReader& r) {
  r.choice("precision", precision, {"fp32", "bf16", "fp16"},
           "fp32; bf16: autocast to bfloat16 (CPU or GPU); fp16: autocast to float16 with a "
           "dynamic loss scale (GPU only). Weights and optimizer state stay fp32 (new)");
  r("device", device,
    "auto (a GPU when LibTorch sees one, else the CPU), cpu, cuda (this worker's GPU: "
    "LOCAL_RANK) or cuda:N; nabu train --device replaces it (new)");
  r.require(is_device_name(device), "device", "'" + device + "' is not auto, cpu, cuda or cuda:N");
}

StageSettings TrainerOptions::stage(std::size_t index) const {
  StageSettings stage;
  stage.index = static_cast<int>(index);
  stage.segment_length = segment_lengths.at(index);
  stage.batch_size = data.batch_size.at(index);
  // numbatches_to_aggregate == 0 means one minibatch per update (docs/trainer.md).
  stage.numbatches_to_aggregate = std::max(1, data.numbatches_to_aggregate.at(index));
  stage.initial_learning_rate = learning_rate.initial_learning_rate.at(index);
  const auto& decay = learning_rate.learning_rate_decay;
  stage.learning_rate_decay = decay.size() == 1 ? decay[0] : decay.at(index);
  const auto& caps = schedule.max_steps;
  stage.max_steps = caps.size() == 1 ? caps[0] : caps.at(index);
  stage.max_steps_reason = "max_steps reached";
  return stage;
}

int StageScheduleOptions::max_tries() const {
  return num_tries == "None" ? -1 : static_cast<int>(*parse_int(num_tries));
}

double TrainerOptions::task_weight(std::size_t task_index) const {
  const double weight = task_weights.empty() ? 1.0 : task_weights.at(task_index);
  if (task_loss_combination != "mean") return weight;
  double total = 0;
  for (std::size_t t = 0; t < tasks.size(); ++t) total += task_weights.empty() ? 1.0 : task_weights[t];
  return weight / total;
}

std::vector<std::pair<std::string, double>> OptimizerOptions::multipliers() const {
  std::vector<std::pair<std::string, double>> pairs;
  for (const auto& text : gradient_multipliers) pairs.push_back(*parse_multiplier(text));
  return pairs;
}

TrainerOptions read_trainer_options(const ConfigFile& trainer_cfg) {
  return read_options<TrainerOptions>(trainer_cfg.section("trainer"), "[trainer] of trainer.cfg");
}

std::vector<StageSettings> resolve_stages(const TrainerOptions& options,
                                          const std::vector<int64_t>& command_line_max_steps) {
  if (command_line_max_steps.size() > 1 && command_line_max_steps.size() != options.num_stages())
    throw ConfigError(fmt::format(
        "--max-steps={}: {} values for the {} stage(s) of trainer.cfg's segment_lengths ({}); "
        "give one value per stage, or one for every stage",
        fmt::join(command_line_max_steps, ","), command_line_max_steps.size(),
        options.num_stages(), fmt::join(options.segment_lengths, " ")));
  std::vector<StageSettings> stages;
  for (std::size_t i = 0; i < options.num_stages(); ++i) {
    StageSettings stage = options.stage(i);
    if (!command_line_max_steps.empty()) {
      int64_t given =
          command_line_max_steps[std::min(i, command_line_max_steps.size() - 1)];
      if (given >= 0) {
        stage.max_steps = given;
        stage.max_steps_reason = "--max-steps reached";
      }
    }
    stages.push_back(stage);
  }
  return stages;
}

std::pair<int64_t, int64_t> ProfilingOptions::profile_range() const {
  return parse_profile_steps(profile_steps);
}

}  // namespace nabu
