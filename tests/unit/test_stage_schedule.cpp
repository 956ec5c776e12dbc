// The stage schedule's "when" rules, without a model or a process: each test walks a StageState
// through updates the way the stage loop does and records what the schedule answered.
#include <gtest/gtest.h>

#include <deque>
#include <type_traits>
#include <vector>

#include "nabu/neuralnetworks/trainers/checkpoint.h"
#include "nabu/neuralnetworks/trainers/stage_schedule.h"
#include "test_helpers.h"

using namespace nabu;

namespace {

// The loop's order: validate if due, stop if over, else one update of `seconds`.
struct Walk {
  std::vector<int64_t> validations;
  std::string stop;
  int64_t steps = 0;
};

Walk walk(const StageSchedule& schedule, StageState state, double seconds_per_update = 1.0) {
  Walk result;
  for (int guard = 0; guard < 100000; ++guard) {
    if (schedule.validate_now(state)) {
      result.validations.push_back(state.step);
      state.validation.validated_step = state.step;
      state.validation.seconds_since_validation = 0;
      StageSchedule::validated(state);
    }
    if (auto reason = schedule.stop_reason(state)) {
      result.stop = *reason;
      break;
    }
    StageSchedule::updated(state, seconds_per_update);
  }
  result.steps = state.step;
  return result;
}

StageState fresh(const StageSchedule& schedule) {
  StageState state;
  state.validation = schedule.initial_validation(ValidationState{});
  return state;
}

StageScheduleSettings options_with(int64_t epoch_steps, int64_t valid_frequency) {
  StageScheduleSettings options;
  options.epoch_steps = epoch_steps;
  options.validates = true;
  options.schedule.valid_frequency = valid_frequency;
  return options;
}

}  // namespace

TEST(StageSchedule, ValidatesEveryFrequencyFromZeroAndAtTheLastStepOnce) {
  StageSchedule schedule(options_with(25, 10));
  auto result = walk(schedule, fresh(schedule));
  EXPECT_EQ(result.validations, (std::vector<int64_t>{0, 10, 20, 25}));
  EXPECT_EQ(result.stop, "step limit reached");
  EXPECT_EQ(result.steps, 25);
  // A last step that is due anyway is validated once.
  StageSchedule even(options_with(20, 10));
  EXPECT_EQ(walk(even, fresh(even)).validations, (std::vector<int64_t>{0, 10, 20}));
}

TEST(StageSchedule, MaxStepsCapsTheStageWithItsReason) {
  auto options = options_with(100, 10);
  options.max_steps = 15;
  options.max_steps_reason = "--max-steps reached";
  StageSchedule schedule(options);
  EXPECT_EQ(options.limit(), 15);
  auto result = walk(schedule, fresh(schedule));
  EXPECT_EQ(result.steps, 15);
  EXPECT_EQ(result.stop, "--max-steps reached");
  EXPECT_EQ(result.validations, (std::vector<int64_t>{0, 10, 15}));
  // The epochs end first: their reason.
  options.max_steps = 500;
  EXPECT_EQ(walk(StageSchedule(options), fresh(StageSchedule(options))).stop,
            "step limit reached");
}

TEST(StageSchedule, TrainingTimeBudgetStopsAndTheLastStepIsValidated) {
  auto options = options_with(1000, 100);
  options.schedule.max_train_minutes = 12.5 / 60;  // 2.5 s per update: stops after update 5
  StageSchedule schedule(options);
  auto result = walk(schedule, fresh(schedule), 2.5);
  EXPECT_EQ(result.steps, 5);
  EXPECT_EQ(result.stop, "training time budget reached");
  EXPECT_EQ(result.validations, (std::vector<int64_t>{0, 5}));
}

TEST(StageSchedule, ValidEverySecondsWhicheverComesFirst) {
  auto options = options_with(30, 10);
  options.schedule.valid_every_seconds = 4;  // 1 s per update: every 4 updates
  StageSchedule schedule(options);
  EXPECT_EQ(walk(schedule, fresh(schedule)).validations,
            (std::vector<int64_t>{0, 4, 8, 12, 16, 20, 24, 28, 30}));
}

TEST(StageSchedule, FirstValidationAfterAStartDelay) {
  auto options = options_with(40, 10);
  options.schedule.valid_start_step = 15;
  StageSchedule schedule(options);
  EXPECT_EQ(walk(schedule, fresh(schedule)).validations, (std::vector<int64_t>{15, 25, 35, 40}));
}

TEST(StageSchedule, ThrottleAllowsOneValidationPerIntervalButNotTheFirstOrLast) {
  auto options = options_with(23, 2);
  options.schedule.valid_min_seconds = 5;  // due every 2 updates, allowed every 5 s (updates)
  StageSchedule schedule(options);
  EXPECT_EQ(walk(schedule, fresh(schedule)).validations,
            (std::vector<int64_t>{0, 5, 10, 15, 20, 23}));
}

TEST(StageSchedule, NoValidationTasksNeverValidate) {
  auto options = options_with(10, 1);
  options.validates = false;
  StageSchedule schedule(options);
  auto result = walk(schedule, fresh(schedule));
  EXPECT_TRUE(result.validations.empty());
  EXPECT_EQ(result.steps, 10);
}

TEST(StageSchedule, AResumedStageDecidesAsAnUninterruptedOne) {
  auto options = options_with(25, 10);
  options.schedule.valid_every_seconds = 7;
  StageSchedule schedule(options);
  auto whole = walk(schedule, fresh(schedule));
  // Stopped after update 13 (as a checkpoint holds it), resumed: the state carries on.
  StageState state = fresh(schedule);
  std::vector<int64_t> first;
  while (state.step < 13) {
    if (schedule.validate_now(state)) {
      first.push_back(state.step);
      state.validation.validated_step = state.step;
      state.validation.seconds_since_validation = 0;
      StageSchedule::validated(state);
    }
    StageSchedule::updated(state, 1.0);
  }
  StageState resumed = state;  // what the checkpoint saved...
  resumed.validated_in_run = -1;  // ...without this run's memory
  resumed.run_start = resumed.step;
  auto rest = walk(schedule, resumed);
  first.insert(first.end(), rest.validations.begin(), rest.validations.end());
  EXPECT_EQ(first, whole.validations);
}

TEST(StageSchedule, CheckpointsByMinutesOrUpdates) {
  StageScheduleSettings options;
  options.epoch_steps = 100;
  options.schedule.checkpoint_every = 1;  // minutes: 60 s
  options.schedule.checkpoint_every_steps = 0;
  StageSchedule by_time(options);
  StageState state;
  std::vector<int64_t> saved;
  for (int update = 0; update < 10; ++update) {
    StageSchedule::updated(state, 25.0);
    if (by_time.checkpoint_now(state)) {
      saved.push_back(state.step);
      StageSchedule::checkpointed(state);
    }
  }
  EXPECT_EQ(saved, (std::vector<int64_t>{3, 6, 9}));
  options.schedule.checkpoint_every = 0;
  options.schedule.checkpoint_every_steps = 4;
  StageSchedule by_steps(options);
  state = StageState{};
  saved.clear();
  for (int update = 0; update < 10; ++update) {
    StageSchedule::updated(state, 25.0);
    if (by_steps.checkpoint_now(state)) saved.push_back(state.step);
  }
  EXPECT_EQ(saved, (std::vector<int64_t>{4, 8}));
}

TEST(StageSchedule, ExportsKeptCheckpointsProgressAndProfile) {
  StageScheduleSettings options;
  options.epoch_steps = 50;
  options.max_steps = 23;
  options.schedule.export_every = 10;
  options.schedule.keep_checkpoint_every_hours = 1.0 / 60;  // 60 s
  options.schedule.progress_every = 10;
  options.profile = {3, 5};
  StageSchedule schedule(options);
  StageState state;
  state.run_start = 2;
  state.step = 2;
  std::vector<int64_t> exports, progress, kept;
  while (!schedule.stop_reason(state)) {
    StageSchedule::updated(state, 20.0);
    if (schedule.export_now(state)) exports.push_back(state.step);
    if (schedule.log_progress_now(state)) progress.push_back(state.step);
    if (schedule.keep_checkpoint_now(state)) {
      kept.push_back(state.step);
      StageSchedule::kept(state);
    }
  }
  EXPECT_EQ(exports, (std::vector<int64_t>{10, 20}));
  // The first update of the run, every progress_every, and the last.
  EXPECT_EQ(progress, (std::vector<int64_t>{3, 10, 20, 23}));
  EXPECT_EQ(kept, (std::vector<int64_t>{5, 8, 11, 14, 17, 20, 23}));
  EXPECT_FALSE(schedule.profile_starts(2));
  EXPECT_TRUE(schedule.profile_starts(3));
  EXPECT_FALSE(schedule.profile_ends(4));
  EXPECT_TRUE(schedule.profile_ends(5));
  StageScheduleSettings off;
  EXPECT_FALSE(StageSchedule(off).profile_starts(0));
}

namespace {

// Gives every saved field of a state its own value (k-th field: k + 0.5, or k for integers), or
// lists the fields' keys and values.
struct NumberFields {
  double next = 1;
  std::vector<std::pair<std::string, double>>* seen = nullptr;
  template <typename Number>
  void number(const std::string& key, Number& value) {
    if (seen) {
      seen->emplace_back(key, static_cast<double>(value));
    } else {
      value = static_cast<Number>(next + (std::is_integral<Number>::value ? 0.0 : 0.5));
      next += 1;
    }
  }
  void operator()(const std::string& key, int64_t& value, bool) { number(key, value); }
  void operator()(const std::string& key, int& value, bool) { number(key, value); }
  void operator()(const std::string& key, double& value, bool) { number(key, value); }
  void operator()(const std::string& key, std::deque<double>& values, bool) {
    if (!seen) values = {next++, next++};
    for (double v : values) if (seen) seen->emplace_back(key, v);
  }
  void operator()(const std::string& key, std::vector<nabu::ValidationTrack>& tracks, bool) {
    if (!seen) tracks.resize(2);
    for (std::size_t i = 0; i < tracks.size(); ++i)
      tracks[i].for_each_saved([&](const std::string& field, auto& value, bool required) {
        (*this)(key + std::to_string(i) + "/" + field, value, required);
      });
  }
};

}  // namespace

// StageState's one list of saved fields is what a checkpoint holds: every field written comes
// back with its value, and the fields of this run only do not.
TEST(StageState, EveryFieldOfItsListComesBackFromACheckpoint) {
  nabu::testing::TempDir dir;
  nabu::TrainingCheckpoint checkpoint;
  checkpoint.stage = "100";
  checkpoint.rng_state = nabu::rng_state();
  checkpoint.state.for_each_saved(NumberFields{});
  checkpoint.state.run_start = 7;
  checkpoint.state.validated_in_run = 9;
  nabu::save_checkpoint(dir / "c.pt", checkpoint, {});
  const auto loaded = nabu::load_checkpoint(dir / "c.pt", {});
  std::vector<std::pair<std::string, double>> written, read;
  NumberFields list_written, list_read;
  list_written.seen = &written;
  list_read.seen = &read;
  checkpoint.state.for_each_saved(list_written);
  nabu::StageState copy = loaded.state;
  copy.for_each_saved(list_read);
  EXPECT_EQ(read, written);
  EXPECT_GE(written.size(), 15u);  // 7 fields, 2 tracks of 3 fields and 2 relative values each
  EXPECT_EQ(loaded.state.run_start, 0);
  EXPECT_EQ(loaded.state.validated_in_run, -1);
}
