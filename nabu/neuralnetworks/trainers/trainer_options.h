// trainer.cfg [trainer]: one options struct, read and validated in one place (its `declare`).
// The original's keys keep their meaning (docs/trainer.md); the new ones say so in their help.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/options.h"
#include "nabu/pipeline/dynamic_mixing_options.h"

namespace nabu {

// The values of one stage of the segment-length curriculum, resolved once before the stage's
// trainer is built (the command line's --max-steps already applied).
struct StageSettings {
  std::string segment_length;  // "100", "full", ...
  int index = 0;
  int batch_size = 1;
  int numbatches_to_aggregate = 1;
  double initial_learning_rate = 1e-3;
  double learning_rate_decay = 1.0;
  int64_t max_steps = -1;       // -1: as many as num_epochs give
  std::string max_steps_reason;  // what set max_steps, for the log ("--max-steps reached")
};

// trainer.cfg's keys fall into five groups, each declared once (its `declare`, called by
// TrainerOptions::declare: every key stays in [trainer]) and handed whole to the part that uses
// it. The per-stage lists (one value per segment length) are resolved into StageSettings.

// When to validate, checkpoint, export and stop (StageSchedule, ValidationPolicy).
struct StageScheduleOptions {
  int num_epochs = 100;
  std::vector<int> max_steps{-1};  // new: per stage cap on the updates, -1 = none
  int valid_frequency = 150;
  double valid_every_seconds = 0;  // new: also validate after this much training time (0 = off)
  int valid_start_step = 0;        // new: no validation before this update (but the last)
  double valid_min_seconds = 0;    // new: at most one validation per this much training time
  double max_train_minutes = 0;    // new: training-time budget per stage (0 = none)
  bool valid_adapt = false;
  bool go_back = false;
  std::string num_tries = "3";  // an integer, or None for no early stopping
  bool reset_tries = true;
  double checkpoint_every = 10.0;  // minutes
  int checkpoint_every_steps = 0;  // new: also every N updates (0 = off)
  int average_checkpoints = 0;     // new: N best validated models averaged into model_avg.pt
  int export_every = 0;            // new: updates between model snapshots (0 = off)
  double keep_checkpoint_every_hours = 0;  // new: keep latest.pt every H hours (0 = off)
  int progress_every = 10;         // steps between progress lines

  void declare(OptionsReader& r);
  // num_tries as an int; -1 when disabled (None).
  int max_tries() const;
};

// The learning-rate schedule (learning_rate.h, docs/trainer.md "Learning rate").
struct LearningRateOptions {
  std::vector<double> initial_learning_rate{1e-3};  // per stage
  std::vector<double> learning_rate_decay{1.0};     // per stage, or one value
  std::string lr_schedule = "exponential";  // exponential | step | cosine | noam
  int warmup_steps = 0;                     // linear warmup over a stage's first updates
  int lr_step_size = 0;                     // step: updates per stair
  double lr_step_factor = 0.1;              // step: factor per stair
  double lr_min = 0.0;                      // cosine: the value at the stage's num_steps

  void declare(OptionsReader& r);
};

// The update rule (ParameterUpdate; new: the original always uses Adam with TF's defaults).
struct OptimizerOptions {
  std::string optimizer = "adam";
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8;
  // Where adam adds epsilon: "libtorch" to the bias-corrected root sqrt(v / (1 - beta2^t)) (the
  // Adam paper, LibTorch, PyTorch), "tensorflow" to sqrt(v) before the correction
  // (tf.train.AdamOptimizer, which the original uses); docs/trainer.md, "One update".
  std::string adam_epsilon_placement = "libtorch";
  double momentum = 0.0;
  double weight_decay = 0.0;
  double rmsprop_decay = 0.9, rmsprop_epsilon = 1e-10;
  double clip_grad_value = 2e7;
  double clip_grad_norm = 0.0;  // new: global-norm clipping, 0 = off
  // The original's two orders (docs/trainer.md, "Differences from the original"): clamp each
  // minibatch's gradient before it is summed (seed 001) instead of the step's sum (Nabu-MSSS);
  // clip each tensor to clip_grad_norm (seed 003, slim) instead of the global norm.
  bool clip_grad_value_per_minibatch = false;
  bool clip_grad_norm_per_tensor = false;
  bool normalize_gradients = true;
  // The original's acc_steps means both of the two below; each can be chosen on its own: one
  // optimizer step per task (ParameterUpdate), one validation track per validated task
  // (StageValidation). Read after declare: acc_steps = True has set both.
  bool acc_steps = false;
  bool update_per_task = false;
  bool validate_per_task = false;
  bool normalize_weights_acc_steps = false;
  std::vector<std::string> freeze_parameters;     // regular expressions over parameter names
  std::vector<std::string> gradient_multipliers;  // "regex:factor"

  void declare(OptionsReader& r);
  // gradient_multipliers as (regular expression, factor) pairs.
  std::vector<std::pair<std::string, double>> multipliers() const;
};

// How training examples are batched and loaded (TaskGradients's input pipeline).
struct DataOptions {
  std::vector<int> batch_size{8};              // per stage
  std::vector<int> numbatches_to_aggregate{1};  // per stage
  int numbuckets = 1;
  bool shuffle = true;  // new: the original never shuffles (file order)
  int prefetch = 4;     // batches the loader keeps ready
  // New: new training mixtures every epoch (pipeline/dynamic_mixing.h).
  bool dynamic_mixing = false;
  // The dynamic_mixing_* keys, as dynamic mixing takes them whole (every task adds its seed,
  // segment length and examples per epoch).
  DynamicMixingOptions mixing;

  void declare(OptionsReader& r);
};

// What is measured besides the losses (new).
struct ProfilingOptions {
  std::string profile_steps;  // "A-B", updates to trace and tabulate
  bool log_norms = false;     // per-model parameter and gradient norms in metrics
  int histogram_steps = 0;    // every parameter's TensorBoard histogram every N updates (0: none)
  // The original's debug lines, one per trained tensor after every update: the mean absolute
  // step x 1e4 (print_var_updates) and |gradient| statistics (print_grads_stats).
  bool print_var_updates = false;
  bool print_grads_stats = false;

  void declare(OptionsReader& r);
  // profile_steps as (first, last) update; {0, 0} when off.
  std::pair<int64_t, int64_t> profile_range() const;
};

// Where and in what precision the models compute (new; docs/devices.md). --device replaces
// `device`.
struct ComputeOptions {
  std::string device = "auto";     // auto | cpu | cuda | cuda:N
  std::string precision = "fp32";  // fp32 | bf16 | fp16

  void declare(OptionsReader& r);
};

struct TrainerOptions {
  std::string trainer = "multi_task";
  std::vector<std::string> tasks;
  std::vector<std::string> segment_lengths{"full"};
  std::vector<double> task_weights;  // default: 1 per task
  // sum: the weighted sum of the task losses (Nabu-MSSS); mean: the weights divided by their
  // sum, which without task_weights is the unweighted mean of the older trainer (seed 001).
  std::string task_loss_combination = "sum";
  std::string init_file;
  StageScheduleOptions schedule;
  LearningRateOptions learning_rate;
  OptimizerOptions optimizer;
  DataOptions data;
  ProfilingOptions profiling;
  ComputeOptions compute;

  void declare(OptionsReader& r);
  StageSettings stage(std::size_t index) const;
  std::size_t num_stages() const { return segment_lengths.size(); }
  // The weight of a task's loss in the update and the totals: task_weights (1 by default),
  // divided by their sum when task_loss_combination is mean.
  double task_weight(std::size_t task_index) const;
};

// Reads and validates [trainer] of trainer.cfg.
TrainerOptions read_trainer_options(const ConfigFile& trainer_cfg);

// The stages as they will run: trainer.cfg's per-stage values, with `command_line_max_steps`
// (--max-steps: one value for every stage or one per stage, the last repeating; empty or -1 =
// not given) replacing the recipe's max_steps.
std::vector<StageSettings> resolve_stages(const TrainerOptions& options,
                                          const std::vector<int64_t>& command_line_max_steps);

}  // namespace nabu
