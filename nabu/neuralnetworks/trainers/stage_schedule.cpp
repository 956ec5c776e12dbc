#include "nabu/neuralnetworks/trainers/stage_schedule.h"

#include <algorithm>

namespace nabu {

int64_t StageScheduleSettings::limit() const {
  return max_steps >= 0 ? std::min(epoch_steps, max_steps) : epoch_steps;
}

StageSchedule::StageSchedule(StageScheduleSettings options) : options_(std::move(options)) {}

ValidationState StageSchedule::initial_validation(ValidationState state) const {
  state.validated_step = -options_.schedule.valid_frequency;
  state.seconds_since_validation = 0;
  return state;
}

std::optional<std::string> StageSchedule::stop_reason(const StageState& state) const {
  if (state.step >= options_.epoch_steps) return "step limit reached";
  if (options_.max_steps >= 0 && state.step >= options_.max_steps)
    return options_.max_steps_reason;
  if (options_.schedule.max_train_minutes > 0 &&
      state.train_seconds >= options_.schedule.max_train_minutes * 60)
    return "training time budget reached";
  return std::nullopt;
}

bool StageSchedule::validate_now(const StageState& state) const {
  if (!options_.validates) return false;
  if (stop_reason(state) && state.validated_in_run != state.step) return true;
  const ValidationState& validation = state.validation;
  bool due = state.step - validation.validated_step >= options_.schedule.valid_frequency ||
             (options_.schedule.valid_every_seconds > 0 &&
              validation.seconds_since_validation >= options_.schedule.valid_every_seconds);
  if (state.step < options_.schedule.valid_start_step) return false;
  // The throttle leaves the first validation alone (nothing was validated yet).
  bool validated_before = validation.validated_step >= 0;
  if (options_.schedule.valid_min_seconds > 0 && validated_before &&
      validation.seconds_since_validation < options_.schedule.valid_min_seconds)
    return false;
  return due;
}

bool StageSchedule::checkpoint_now(const StageState& state) const {
  return (options_.schedule.checkpoint_every > 0 &&
          state.seconds_since_checkpoint >= options_.schedule.checkpoint_every * 60) ||
         (options_.schedule.checkpoint_every_steps > 0 &&
          state.step % options_.schedule.checkpoint_every_steps == 0);
}

bool StageSchedule::export_now(const StageState& state) const {
  return options_.chief && options_.schedule.export_every > 0 &&
         state.step % options_.schedule.export_every == 0;
}

bool StageSchedule::log_progress_now(const StageState& state) const {
  return state.step == state.run_start + 1 || state.step == options_.limit() ||
         (options_.schedule.progress_every > 0 &&
          state.step % options_.schedule.progress_every == 0);
}

bool StageSchedule::keep_checkpoint_now(const StageState& state) const {
  return options_.chief && options_.schedule.keep_checkpoint_every_hours > 0 &&
         state.seconds_since_kept >= options_.schedule.keep_checkpoint_every_hours * 3600;
}

bool StageSchedule::profile_starts(int64_t update) const {
  return options_.profile.first > 0 && update == options_.profile.first;
}

bool StageSchedule::profile_ends(int64_t update) const {
  return options_.profile.first > 0 && update == options_.profile.second;
}

void StageSchedule::updated(StageState& state, double seconds) {
  ++state.step;
  state.train_seconds += seconds;
  state.seconds_since_checkpoint += seconds;
  state.seconds_since_kept += seconds;
  state.validation.seconds_since_validation += seconds;
}

void StageSchedule::validated(StageState& state) { state.validated_in_run = state.step; }

void StageSchedule::checkpointed(StageState& state) { state.seconds_since_checkpoint = 0; }

void StageSchedule::kept(StageState& state) { state.seconds_since_kept = 0; }

void StageSchedule::resumed(StageState& state, const StageState& saved) {
  state = saved;
  state.run_start = state.step;
}

void StageSchedule::went_back(StageState& state, const StageState& validated, bool halve_lr) {
  state.step = validated.step;
  state.validation.lr_factor = validated.validation.lr_factor * (halve_lr ? 0.5 : 1.0);
}

void StageSchedule::started(StageState& state, ValidationState validation) {
  state = StageState{};
  state.validation = std::move(validation);
}

bool StageSchedule::counts_time() const {
  return options_.schedule.valid_every_seconds > 0 || options_.schedule.valid_min_seconds > 0 ||
         options_.schedule.max_train_minutes > 0;
}

}  // namespace nabu
