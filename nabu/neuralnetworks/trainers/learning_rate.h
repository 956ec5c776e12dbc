// The learning rate of one update of a stage: a pure function of (update, num_steps, lr_factor),
// which the checkpoint holds, so a resumed run repeats the uninterrupted run's rates exactly.
// docs/trainer.md, "Learning rate", writes every formula out.
#pragma once

#include <cstdint>
#include <string>

namespace nabu {

struct StageSettings;
struct LearningRateOptions;

struct LearningRateSchedule {
  enum class Kind { kExponential, kStep, kCosine, kNoam };
  Kind kind = Kind::kExponential;
  double initial = 1e-3;
  double decay = 1.0;          // exponential: total decay over num_steps
  int64_t warmup_steps = 0;    // linear warmup (all); the peak of noam
  int64_t step_size = 0;       // step: updates per stair
  double step_factor = 0.1;    // step: factor per stair
  double min = 0.0;            // cosine: the value at the end of its span
  int64_t max_steps = -1;      // the stage's cap on its updates (-1: none)

  // The updates the schedule spans in a stage of num_steps updates: a cosine anneals over the
  // updates the stage will make, max_steps when that ends it sooner (docs/trainer.md, "Learning
  // rate"); the other schedules keep the original's num_steps.
  int64_t span(int64_t num_steps) const;

  // The schedule of one stage: trainer.cfg's lr_* keys with the stage's initial rate and decay.
  static LearningRateSchedule from(const LearningRateOptions& options, const StageSettings& stage);
  static Kind parse_kind(const std::string& name);  // a name declare() accepted

  // The rate of the update with 0-based index `step` (the number of updates already applied)
  // in a stage of `num_steps` updates (num_epochs' worth, before any cap); lr_factor is the
  // validation's halving factor.
  double operator()(int64_t step, int64_t num_steps, double lr_factor) const;
};

}  // namespace nabu
