// Every "is it time to ...?" of a stage (docs/trainer.md, "Schedule"), in one place, as marian's
// Scheduler: validation (also at the last update), checkpoints (minutes or updates), model
// exports, kept checkpoints, progress lines, the profiled updates and stopping (updates, epochs,
// a training-time budget). The answers are pure functions of StageScheduleSettings (trainer.cfg's
// StageScheduleOptions as read) and a StageState;
// the stage loop only asks, and the state travels in every checkpoint so that a resumed stage
// decides exactly as an uninterrupted one. What follows a validation (halve the learning rate,
// go back, stop early) stays with the ValidationPolicy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "nabu/neuralnetworks/trainers/trainer_options.h"
#include "nabu/neuralnetworks/trainers/validation_policy.h"

namespace nabu {

// What a stage's schedule reads: trainer.cfg's StageScheduleOptions, whole, and what the stage adds.
struct StageScheduleSettings {
  StageScheduleOptions schedule;      // valid_*, checkpoint_*, export_every, progress_every, ...
  int64_t epoch_steps = 0;       // the updates num_epochs give
  int64_t max_steps = -1;        // the stage's cap on them (-1: none)
  std::string max_steps_reason = "max_steps reached";
  bool validates = false;                     // the stage has validation tasks
  bool chief = true;                          // exports and kept checkpoints are the chief's
  std::pair<int64_t, int64_t> profile{0, 0};  // updates A..B (profile_steps), {0, 0}: off

  // The last update the stage runs: the epochs' total or the max_steps cap.
  int64_t limit() const;
};

struct StageState {
  int64_t step = 0;  // updates done
  ValidationState validation;
  double train_seconds = 0;             // training time of the stage, over every run
  double seconds_since_checkpoint = 0;  // training time since latest.pt was written (not saved)
  double seconds_since_kept = 0;        // training time since a checkpoint was kept
  // This run only (not saved):
  int64_t run_start = 0;          // the update this run started after (0, or the resumed step)
  int64_t validated_in_run = -1;  // the update validated last in this run

  // The fields a checkpoint keeps, each once with its key: `visit(key, field, required)`, for
  // int64_t, int, double and deque<double> fields and the validation tracks (each track's fields
  // under "validation/track<i>/"). checkpoint.cpp writes and reads all of them through this one
  // list; a field that is not required reads as 0 from a checkpoint written before it existed.
  template <typename Visit>
  void for_each_saved(Visit&& visit) {
    visit("meta/step", step, true);
    visit("schedule/train_seconds", train_seconds, false);
    visit("schedule/seconds_since_kept", seconds_since_kept, false);
    visit("validation/validated_step", validation.validated_step, true);
    visit("validation/lr_factor", validation.lr_factor, true);
    visit("validation/seconds_since", validation.seconds_since_validation, false);
    visit("validation/count", validation.count, false);
    visit("validation/tracks", validation.tracks, true);
  }
};

class StageSchedule {
 public:
  explicit StageSchedule(StageScheduleSettings options);
  const StageScheduleSettings& options() const { return options_; }

  // Why the stage ends before another update (the step limit, the epochs, the time budget), or
  // nullopt. Early stopping is the ValidationPolicy's.
  std::optional<std::string> stop_reason(const StageState& state) const;
  // Before the next update: validation is due (valid_frequency updates or valid_every_seconds
  // since the last one, from valid_start on, at most one per valid_min_seconds), or the stage
  // ends now and this update was not validated in this run (it keeps its best validated model,
  // so later updates would be thrown away).
  bool validate_now(const StageState& state) const;
  // After update state.step:
  bool checkpoint_now(const StageState& state) const;
  bool export_now(const StageState& state) const;
  bool log_progress_now(const StageState& state) const;
  // Whether a checkpoint just written should be kept (keep_checkpoint_every_hours).
  bool keep_checkpoint_now(const StageState& state) const;
  // Whether any decision reads training time (valid_every_seconds, valid_min_seconds, a time
  // budget): then every rank must count the chief's seconds, which costs a broadcast per update.
  bool counts_time() const;
  // The profiled range: its first update starts the trace before it runs, its last ends it.
  bool profile_starts(int64_t update) const;
  bool profile_ends(int64_t update) const;

  // The state after an update that took `seconds` (the chief's, the same on every rank).
  static void updated(StageState& state, double seconds);
  // After a validation at state.step (the ValidationPolicy updated state.validation).
  static void validated(StageState& state);
  static void checkpointed(StageState& state);
  static void kept(StageState& state);
  // The state a run continues from: a checkpoint's (this run starts after its step).
  static void resumed(StageState& state, const StageState& saved);
  // Gone back to the last validated state: its step and learning-rate factor (halved or not).
  static void went_back(StageState& state, const StageState& validated, bool halve_lr);
  // A fresh stage: every field at its start, the validation state `validation`.
  static void started(StageState& state, ValidationState validation);

  // A validation state that makes the first validation due at update 0.
  ValidationState initial_validation(ValidationState state) const;

 private:
  StageScheduleSettings options_;
};

}  // namespace nabu
