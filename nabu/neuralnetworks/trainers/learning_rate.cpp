#include "nabu/neuralnetworks/trainers/learning_rate.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "nabu/neuralnetworks/trainers/trainer_options.h"
#include "nabu/neuralnetworks/trainers/validation_policy.h"

namespace nabu {

LearningRateSchedule::Kind LearningRateSchedule::parse_kind(const std::string& name) {
  if (name == "exponential") return Kind::kExponential;
  if (name == "step") return Kind::kStep;
  if (name == "cosine") return Kind::kCosine;
  if (name == "noam") return Kind::kNoam;
  throw std::invalid_argument("unknown lr_schedule '" + name + "'");
}

LearningRateSchedule LearningRateSchedule::from(const LearningRateOptions& options,
                                                const StageSettings& stage) {
  LearningRateSchedule schedule;
  schedule.kind = parse_kind(options.lr_schedule);
  schedule.initial = stage.initial_learning_rate;
  schedule.decay = stage.learning_rate_decay;
  schedule.warmup_steps = options.warmup_steps;
  schedule.step_size = options.lr_step_size;
  schedule.step_factor = options.lr_step_factor;
  schedule.min = options.lr_min;
  schedule.max_steps = stage.max_steps;
  return schedule;
}

int64_t LearningRateSchedule::span(int64_t num_steps) const {
  if (kind == Kind::kCosine && max_steps > 0) return std::min(num_steps, max_steps);
  return num_steps;
}

double LearningRateSchedule::operator()(int64_t step, int64_t num_steps,
                                        double lr_factor) const {
  // n: the update's 1-based number, as the Transformer paper's step_num.
  const double n = static_cast<double>(step + 1);
  const double warmup = static_cast<double>(warmup_steps);
  double rate = 0;
  switch (kind) {
    case Kind::kExponential:
      // Without warmup exactly the original's expression (the recipe goldens depend on it).
      if (warmup_steps == 0) return learning_rate(initial, decay, step, num_steps, lr_factor);
      rate = learning_rate(initial, decay, step, num_steps, 1.0);
      break;
    case Kind::kStep:
      rate = initial * std::pow(step_factor, static_cast<double>(step / step_size));
      break;
    case Kind::kCosine: {
      const int64_t steps = span(num_steps);
      double progress =
          steps > 0 ? std::min(1.0, static_cast<double>(step) / static_cast<double>(steps))
                    : 0.0;
      rate = min + (initial - min) * 0.5 * (1.0 + std::cos(std::acos(-1.0) * progress));
      break;
    }
    case Kind::kNoam:
      // initial * min(n / W, sqrt(W / n)): the Transformer's d^-0.5 * min(n^-0.5, n W^-1.5)
      // scaled so that its peak, at the W-th update, is `initial`; its own warmup.
      return initial * std::min(n / warmup, std::sqrt(warmup / n)) * lr_factor;
  }
  if (warmup_steps > 0 && n < warmup) rate *= n / warmup;
  return rate * lr_factor;
}

}  // namespace nabu
