// ValidationPolicy (docs/trainer.md): sequences of validation losses -> expected decisions.
#include <gtest/gtest.h>

#include "nabu/neuralnetworks/trainers/validation_policy.h"

using namespace nabu;

namespace {

struct PolicyRun {
  ValidationPolicy policy;
  ValidationState state;
  explicit PolicyRun(ValidationPolicyOptions options)
      : policy(options), state(policy.initial_state()) {}
  ValidationDecision feed(double loss, int64_t step) { return policy.update({loss}, step, state); }
};

ValidationPolicyOptions defaults() {
  ValidationPolicyOptions options;
  options.max_tries = 3;
  options.reset_tries = true;
  return options;
}

}  // namespace

TEST(ValidationPolicy, FirstValidationImprovesAndIsSaved) {
  PolicyRun run(defaults());
  auto decision = run.feed(5.0, 0);
  EXPECT_TRUE(decision.improved[0]);
  EXPECT_TRUE(decision.save_validated);
  EXPECT_FALSE(decision.terminate);
  EXPECT_EQ(run.state.tracks[0].best, 5.0);
  EXPECT_EQ(run.state.validated_step, 0);
}

TEST(ValidationPolicy, StopsAfterNumTriesConsecutiveNonImprovements) {
  PolicyRun run(defaults());
  run.feed(5.0, 0);
  EXPECT_FALSE(run.feed(5.0, 150).terminate);  // equal counts as worse
  auto second = run.feed(6.0, 300);
  EXPECT_FALSE(second.terminate);
  EXPECT_FALSE(second.save_validated);
  EXPECT_EQ(run.state.tracks[0].tries, 2);
  auto third = run.feed(5.5, 450);
  EXPECT_TRUE(third.terminate);
  EXPECT_FALSE(third.save_validated);
}

TEST(ValidationPolicy, ImprovementResetsTriesOnlyWithResetTries) {
  PolicyRun run(defaults());
  run.feed(5.0, 0);
  run.feed(6.0, 150);
  auto better = run.feed(4.0, 300);
  EXPECT_TRUE(better.save_validated);
  EXPECT_EQ(run.state.tracks[0].tries, 0);
  auto options = defaults();
  options.reset_tries = false;
  PolicyRun no_reset(options);
  no_reset.feed(5.0, 0);
  no_reset.feed(6.0, 150);
  auto improved = no_reset.feed(4.0, 300);
  EXPECT_TRUE(improved.improved[0]);
  EXPECT_FALSE(improved.save_validated);  // tries stay pending: never saved again (original)
  EXPECT_EQ(no_reset.state.tracks[0].best, 4.0);
  no_reset.feed(4.5, 450);
  EXPECT_TRUE(no_reset.feed(4.5, 600).terminate);  // third try overall
}

TEST(ValidationPolicy, RelativeImprovementRuleAfterStep1000) {
  auto options = defaults();
  options.max_tries = 5;
  PolicyRun run(options);
  run.feed(1.0, 0);
  run.feed(0.9995, 300);
  run.feed(0.9991, 600);
  run.feed(0.9990, 900);
  run.feed(0.9989, 1050);
  // FIFO of 5: |rel| sum < 0.004, but the rule only applies to a non-improving validation.
  EXPECT_FALSE(run.feed(0.9988, 1200).terminate);
  auto worse = run.feed(0.9989, 1350);
  EXPECT_TRUE(worse.terminate);
  EXPECT_EQ(worse.reason, "relative improvements became too small");
  PolicyRun early(options);
  early.feed(1.0, 0);
  early.feed(0.9999, 300);
  EXPECT_FALSE(early.feed(0.99995, 600).terminate);  // step <= 1000
}

TEST(ValidationPolicy, ValidAdaptHalvesTheLearningRateFactor) {
  auto options = defaults();
  options.valid_adapt = true;
  PolicyRun run(options);
  run.feed(5.0, 0);
  auto worse = run.feed(6.0, 150);
  EXPECT_TRUE(worse.halve_lr);
  EXPECT_DOUBLE_EQ(run.state.lr_factor, 0.5);
  run.feed(7.0, 300);
  EXPECT_DOUBLE_EQ(run.state.lr_factor, 0.25);
  EXPECT_DOUBLE_EQ(learning_rate(1e-3, 1.0, 10, 100, run.state.lr_factor), 2.5e-4);
}

TEST(ValidationPolicy, GoBackKeepsTheValidatedStep) {
  auto options = defaults();
  options.go_back = true;
  PolicyRun run(options);
  run.feed(5.0, 0);
  auto worse = run.feed(6.0, 150);
  EXPECT_TRUE(worse.go_back);
  EXPECT_EQ(run.state.validated_step, 0);
  auto better = run.feed(4.0, 150);
  EXPECT_FALSE(better.go_back);
  EXPECT_EQ(run.state.validated_step, 150);
}

TEST(ValidationPolicy, NoneNeverStopsOnTries) {
  auto options = defaults();
  options.max_tries = -1;
  PolicyRun run(options);
  run.feed(5.0, 0);
  for (int i = 1; i < 10; ++i) EXPECT_FALSE(run.feed(6.0, i * 10).terminate);
}

TEST(ValidationPolicy, PerTaskTracksSaveOnlyWhenEveryTaskImproved) {
  auto options = defaults();
  options.num_tracks = 2;
  ValidationPolicy policy(options);
  auto state = policy.initial_state();
  EXPECT_TRUE(policy.update({5.0, 3.0}, 0, state).save_validated);
  auto mixed = policy.update({4.0, 3.5}, 150, state);
  EXPECT_EQ(mixed.improved, (std::vector<bool>{true, false}));
  EXPECT_FALSE(mixed.save_validated);
  EXPECT_EQ(state.tracks[0].best, 4.0);
  EXPECT_EQ(state.tracks[1].best, 3.0);
  EXPECT_TRUE(policy.update({3.0, 2.0}, 300, state).save_validated);
  policy.update({3.0, 1.0}, 450, state);
  policy.update({3.0, 0.5}, 600, state);
  EXPECT_TRUE(policy.update({3.0, 0.2}, 750, state).terminate);  // task 0: three tries
}

TEST(TrainerSchedule, LearningRateAndNumSteps) {
  // decay is the total decay over the stage: at step = num_steps the rate is initial * decay.
  EXPECT_DOUBLE_EQ(learning_rate(1e-3, 0.5, 0, 100, 1.0), 1e-3);
  EXPECT_NEAR(learning_rate(1e-3, 0.5, 100, 100, 1.0), 5e-4, 1e-15);
  EXPECT_NEAR(learning_rate(5e-4, 1.5878e-6, 1, 100, 1.0), 5e-4 * std::pow(1.5878e-6, 0.01), 1e-15);
  // (num_epochs * N) // (batch_size * numbatches_to_aggregate), integer division.
  EXPECT_EQ(steps_for_task(100, 20000, 32, 4), 15625);
  EXPECT_EQ(steps_for_task(100, 1001, 400, 2), 125);
  EXPECT_EQ(steps_for_task(100, 1001, 400, 0), 250);  // 0 aggregates = one minibatch per update
  EXPECT_EQ(steps_for_task(100, 1000, 10, 2, 2), 2500);
}

// When validation is due is the StageSchedule's (tests/unit/test_stage_schedule.cpp); a
// validation resets the time since the last one.
TEST(ValidationPolicy, AValidationRecordsItsStepAndResetsTheTimeSinceTheLast) {
  ValidationPolicy policy(defaults());
  auto state = policy.initial_state();
  state.seconds_since_validation = 59.5;
  policy.update({5.0}, 10, state);
  EXPECT_EQ(state.validated_step, 10);
  EXPECT_EQ(state.seconds_since_validation, 0.0);
}

TEST(ValidationPolicy, GoingBackKeepsTheValidatedStep) {
  auto options = defaults();
  options.go_back = true;
  ValidationPolicy policy(options);
  auto state = policy.initial_state();
  policy.update({5.0}, 0, state);
  EXPECT_TRUE(policy.update({6.0}, 10, state).go_back);
  EXPECT_EQ(state.validated_step, 0);
}

// validation_metric: a track of negated scores (−SI-SDR) is negative; a higher score is a lower
// value and an improvement, and the relative improvements keep their size (|previous| divides),
// so the "too small" stop neither fires early nor never.
TEST(ValidationPolicy, NegatedScoresImproveWhenTheScoreRisesAndStopWhenItStalls) {
  PolicyRun run(defaults());
  EXPECT_TRUE(run.feed(-5.0, 0).improved[0]);
  EXPECT_TRUE(run.feed(-6.0, 1100).improved[0]);  // 5 dB -> 6 dB
  EXPECT_NEAR(run.state.tracks[0].relative.back(), 0.2, 1e-12);  // (-5 - -6) / |-5|
  auto worse = run.feed(-5.5, 1200);
  EXPECT_FALSE(worse.improved[0]);
  EXPECT_EQ(run.state.tracks[0].tries, 1);
  EXPECT_FALSE(worse.terminate);
  // Scores within 0.1% of each other: the relative improvements sum below 0.004 -> stop.
  PolicyRun stalled(defaults());
  stalled.feed(-8.0, 0);
  stalled.feed(-8.001, 1100);
  stalled.feed(-8.0015, 1200);
  auto decision = stalled.feed(-8.0015, 1300);
  EXPECT_TRUE(decision.terminate);
  EXPECT_EQ(decision.reason, "relative improvements became too small");
}
