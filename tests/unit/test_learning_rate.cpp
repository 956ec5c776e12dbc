// The learning-rate schedules (learning_rate.h, docs/trainer.md "Learning rate") against their
// formulas written out, the [trainer] rules for their keys, and a whole run: a resumed run's
// learning rates are the uninterrupted run's.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "nabu/core/config.h"
#include "nabu/neuralnetworks/trainers/learning_rate.h"
#include "nabu/neuralnetworks/trainers/trainer_options.h"
#include "nabu/neuralnetworks/trainers/validation_policy.h"
#include "test_helpers.h"
#include "training_fixture.h"

using namespace nabu;
using namespace nabu::testing;
namespace fs = std::filesystem;

namespace {

using Kind = LearningRateSchedule::Kind;

LearningRateSchedule schedule(Kind kind, double initial, int64_t warmup = 0) {
  LearningRateSchedule s;
  s.kind = kind;
  s.initial = initial;
  s.warmup_steps = warmup;
  return s;
}

// Update n = step + 1 of a linear warmup over W updates gets min(1, n / W).
double warmup_factor(int64_t step, int64_t warmup) {
  return warmup == 0 ? 1.0 : std::min(1.0, static_cast<double>(step + 1) / warmup);
}

}  // namespace

TEST(LearningRate, ExponentialWithoutWarmupIsTheOriginalsExpressionBitForBit) {
  auto s = schedule(Kind::kExponential, 1e-3);
  s.decay = 0.1;
  for (int64_t step : {0, 1, 7, 50, 99, 100, 150})
    for (double factor : {1.0, 0.5, 0.125}) {
      EXPECT_EQ(s(step, 100, factor), 1e-3 * std::pow(0.1, step / 100.0) * factor) << step;
      EXPECT_EQ(s(step, 100, factor), learning_rate(1e-3, 0.1, step, 100, factor)) << step;
    }
  EXPECT_EQ(s(5, 0, 1.0), 1e-3);  // no steps: no decay
}

TEST(LearningRate, ExponentialWithWarmup) {
  auto s = schedule(Kind::kExponential, 2e-3, 10);
  s.decay = 0.5;
  for (int64_t step : {0, 4, 9, 10, 60})
    EXPECT_DOUBLE_EQ(s(step, 200, 0.5),
                     2e-3 * std::pow(0.5, step / 200.0) * warmup_factor(step, 10) * 0.5)
        << step;
  EXPECT_DOUBLE_EQ(s(0, 200, 1.0), 2e-3 / 10);  // the first update gets 1/W
  EXPECT_DOUBLE_EQ(s(9, 200, 1.0), 2e-3 * std::pow(0.5, 9 / 200.0));  // the W-th: all of it
}

TEST(LearningRate, StepIsAStaircase) {
  auto s = schedule(Kind::kStep, 1.0);
  s.step_size = 10;
  s.step_factor = 0.5;
  EXPECT_DOUBLE_EQ(s(0, 100, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(s(9, 100, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(s(10, 100, 1.0), 0.5);
  EXPECT_DOUBLE_EQ(s(29, 100, 1.0), 0.25);
  EXPECT_DOUBLE_EQ(s(30, 100, 0.5), 0.125 * 0.5);
  for (int64_t step = 0; step < 120; ++step)
    EXPECT_DOUBLE_EQ(s(step, 100, 1.0), std::pow(0.5, std::floor(step / 10.0))) << step;
}

TEST(LearningRate, StepWithWarmup) {
  auto s = schedule(Kind::kStep, 1.0, 4);
  s.step_size = 3;
  s.step_factor = 0.1;
  for (int64_t step = 0; step < 12; ++step)
    EXPECT_DOUBLE_EQ(s(step, 100, 0.5),
                     std::pow(0.1, std::floor(step / 3.0)) * warmup_factor(step, 4) * 0.5)
        << step;
  EXPECT_DOUBLE_EQ(s(0, 100, 1.0), 0.25);
  EXPECT_DOUBLE_EQ(s(3, 100, 1.0), 0.1);
}

TEST(LearningRate, CosineGoesFromInitialToMinOverNumSteps) {
  auto s = schedule(Kind::kCosine, 1e-2);
  s.min = 1e-4;
  const double pi = std::acos(-1.0);
  for (int64_t step : {0, 1, 25, 50, 75, 99, 100})
    EXPECT_DOUBLE_EQ(s(step, 100, 1.0),
                     1e-4 + (1e-2 - 1e-4) * 0.5 * (1 + std::cos(pi * step / 100.0)))
        << step;
  EXPECT_DOUBLE_EQ(s(0, 100, 1.0), 1e-2);
  EXPECT_DOUBLE_EQ(s(50, 100, 1.0), (1e-2 + 1e-4) / 2);
  EXPECT_DOUBLE_EQ(s(100, 100, 1.0), 1e-4);
  EXPECT_DOUBLE_EQ(s(150, 100, 1.0), 1e-4);  // past num_steps (max_steps beyond it): stays at min
  EXPECT_DOUBLE_EQ(s(100, 100, 0.5), 0.5e-4);  // the halving multiplies min too
  auto to_zero = schedule(Kind::kCosine, 1.0);
  EXPECT_NEAR(to_zero(100, 100, 1.0), 0.0, 1e-15);
}

TEST(LearningRate, CosineWithWarmup) {
  auto s = schedule(Kind::kCosine, 1.0, 5);
  const double pi = std::acos(-1.0);
  for (int64_t step : {0, 2, 4, 5, 40})
    EXPECT_DOUBLE_EQ(s(step, 80, 0.25),
                     0.5 * (1 + std::cos(pi * step / 80.0)) * warmup_factor(step, 5) * 0.25)
        << step;
  EXPECT_DOUBLE_EQ(s(0, 80, 1.0), 0.5 * (1 + std::cos(0.0)) / 5);
}

TEST(LearningRate, CosineSpansTheStagesMaxStepsWhenThatEndsItFirst) {
  auto s = schedule(Kind::kCosine, 1.0);
  s.max_steps = 40;
  const double pi = std::acos(-1.0);
  EXPECT_EQ(s.span(1000), 40);
  EXPECT_EQ(s.span(25), 25);  // num_epochs end the stage first
  for (int64_t step : {0, 10, 20, 39, 40})
    EXPECT_DOUBLE_EQ(s(step, 1000, 1.0), 0.5 * (1 + std::cos(pi * step / 40.0))) << step;
  EXPECT_NEAR(s(40, 1000, 1.0), 0.0, 1e-15);  // the last capped update's successor: at min
  EXPECT_DOUBLE_EQ(s(10, 25, 1.0), 0.5 * (1 + std::cos(pi * 10 / 25.0)));
  s.max_steps = -1;  // no cap: num_steps
  EXPECT_EQ(s.span(1000), 1000);
  EXPECT_DOUBLE_EQ(s(500, 1000, 1.0), 0.5);
  // The other schedules keep the original's num_steps under a cap.
  auto exponential = schedule(Kind::kExponential, 1.0);
  exponential.decay = 0.1;
  exponential.max_steps = 40;
  EXPECT_EQ(exponential.span(1000), 1000);
  EXPECT_EQ(exponential(20, 1000, 1.0), learning_rate(1.0, 0.1, 20, 1000, 1.0));
}

TEST(LearningRate, NoamPeaksAtInitialAtTheWarmupthUpdateAndDecaysAsInverseSqrt) {
  auto s = schedule(Kind::kNoam, 1e-3, 100);
  // lr = initial * min(n / W, sqrt(W / n)), n = step + 1.
  for (int64_t step : {0, 1, 49, 98, 99, 100, 399, 10000}) {
    double n = step + 1.0;
    EXPECT_DOUBLE_EQ(s(step, 50, 1.0), 1e-3 * std::min(n / 100, std::sqrt(100 / n))) << step;
  }
  EXPECT_DOUBLE_EQ(s(0, 50, 1.0), 1e-3 / 100);
  EXPECT_DOUBLE_EQ(s(99, 50, 1.0), 1e-3);        // the 100th update: the peak
  EXPECT_DOUBLE_EQ(s(399, 50, 1.0), 1e-3 / 2);   // 4 W: half the peak
  EXPECT_DOUBLE_EQ(s(399, 50, 0.5), 1e-3 / 4);   // times the halving
  for (int64_t step = 0; step < 1000; ++step) EXPECT_LE(s(step, 50, 1.0), 1e-3 * (1 + 1e-15));
  // The Transformer's formula d^-0.5 * min(n^-0.5, n * W^-1.5), scaled to its peak.
  const double d = 512, warmup = 100;
  for (double n : {1.0, 37.0, 100.0, 2500.0}) {
    double transformer = std::pow(d, -0.5) * std::min(std::pow(n, -0.5), n * std::pow(warmup, -1.5));
    double peak = std::pow(d, -0.5) * std::pow(warmup, -0.5);
    EXPECT_DOUBLE_EQ(s(static_cast<int64_t>(n) - 1, 50, 1.0), 1e-3 * transformer / peak) << n;
  }
}

TEST(LearningRate, FromReadsTheTrainerKeysAndTheStagesRates) {
  auto cfg = ConfigFile::parse(
      "[trainer]\ntasks = task\nsegment_lengths = 100 full\ninitial_learning_rate = 0.01 0.002\n"
      "batch_size = 4 2\nnumbatches_to_aggregate = 1 1\n"
      "lr_schedule = step\nlr_step_size = 7\nlr_step_factor = 0.3\nwarmup_steps = 3\n"
      "max_steps = -1 30\n",
      "trainer.cfg");
  auto options = read_trainer_options(cfg);
  auto s = LearningRateSchedule::from(options.learning_rate, options.stage(1));
  EXPECT_EQ(s.kind, Kind::kStep);
  EXPECT_EQ(s.initial, 0.002);
  EXPECT_EQ(s.step_size, 7);
  EXPECT_EQ(s.step_factor, 0.3);
  EXPECT_EQ(s.warmup_steps, 3);
  EXPECT_EQ(s.max_steps, 30);
  auto defaults = read_trainer_options(ConfigFile::parse("[trainer]\ntasks = task\n", "t.cfg"));
  auto original = LearningRateSchedule::from(defaults.learning_rate, defaults.stage(0));
  EXPECT_EQ(original.kind, Kind::kExponential);
  EXPECT_EQ(original.warmup_steps, 0);
}

TEST(LearningRate, KeysOfAnotherScheduleAndMissingOnesAreErrorsNamingTheKey) {
  auto error = [](const std::string& keys) {
    return error_of([&] {
      read_trainer_options(
          ConfigFile::parse("[trainer]\ntasks = task\n" + keys + "\n", "trainer.cfg"));
    });
  };
  EXPECT_EQ(error("lr_schedule = cosine\nlr_min = 1e-5"), "");
  EXPECT_EQ(error("lr_schedule = noam\nwarmup_steps = 4000"), "");
  EXPECT_EQ(error("lr_schedule = step\nlr_step_size = 10\nlr_step_factor = 0.5\nwarmup_steps = 3"),
            "");
  EXPECT_EQ(error("lr_schedule = cosine\nlearning_rate_decay = 1"), "");  // the stage's record
  auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  auto message = error("lr_schedule = step\nlr_step_size = 10\nlr_min = 0.1");
  EXPECT_TRUE(has(message, "lr_min") && has(message, "applies only to lr_schedule = cosine"))
      << message;
  message = error("lr_schedule = cosine\nlr_step_factor = 0.5");
  EXPECT_TRUE(has(message, "lr_step_factor") && has(message, "lr_schedule = step")) << message;
  message = error("lr_step_size = 5");  // exponential by default
  EXPECT_TRUE(has(message, "lr_step_size") && has(message, "(lr_schedule is exponential)"))
      << message;
  message = error("lr_schedule = noam\nwarmup_steps = 10\nlearning_rate_decay = 0.1");
  EXPECT_TRUE(has(message, "learning_rate_decay") && has(message, "lr_schedule = exponential"))
      << message;
  message = error("lr_schedule = noam");
  EXPECT_TRUE(has(message, "warmup_steps") && has(message, "noam needs warmup_steps > 0"))
      << message;
  message = error("lr_schedule = step");
  EXPECT_TRUE(has(message, "lr_step_size") && has(message, "needs lr_step_size > 0")) << message;
  message = error("lr_schedule = cosine\nlr_min = 0.5");
  EXPECT_TRUE(has(message, "lr_min") && has(message, "must not exceed")) << message;
  message = error("warmup_steps = -1");
  EXPECT_TRUE(has(message, "warmup_steps") && has(message, "must not be negative")) << message;
  message = error("lr_schedule = cosin");
  EXPECT_TRUE(has(message, "lr_schedule") && has(message, "cosine")) << message;
}

// A run killed mid-stage and resumed logs the uninterrupted run's learning rates at every update:
// the schedule depends only on (step, num_steps, lr_factor), which the checkpoint holds.
TEST_F(TrainingRun, ResumedRunHasTheUninterruptedRunsLearningRates) {
  const std::string options =
      "--max-steps=30 --set trainer.cfg:trainer:valid_frequency=5"
      " --set trainer.cfg:trainer:valid_adapt=True --set trainer.cfg:trainer:lr_schedule=cosine"
      " --set trainer.cfg:trainer:warmup_steps=8 --set trainer.cfg:trainer:lr_min=1e-5"
      " --set trainer.cfg:trainer:learning_rate_decay=1";  // the recipe's decays: exponential only
  auto uninterrupted = train("exp_a", options);
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.output;

  kill_training_mid_first_stage(dir_, "exp_b", options);
  if (::testing::Test::HasFatalFailure()) return;

  auto resumed = run_nabu("train --expdir=exp_b --resume --threads=1", dir_.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  for (const std::string stage : {"100", "full"}) {
    auto a = training_values_by_step(dir_ / ("exp_a/" + stage + "/metrics.jsonl"), "lr");
    auto b = training_values_by_step(dir_ / ("exp_b/" + stage + "/metrics.jsonl"), "lr");
    ASSERT_EQ(a.size(), b.size()) << stage;
    ASSERT_GE(a.size(), 10u) << stage;
    for (const auto& [step, rate] : a) EXPECT_EQ(rate, b[step]) << stage << " update " << step;
    // The warmup shows: the rate rises over the first updates.
    EXPECT_LT(a.begin()->second, std::next(a.begin(), 5)->second) << stage;
  }
}

// A cosine anneals over the updates a stage makes: max_steps when that ends the stage before
// num_epochs would (the DC recipe's 100 epochs of 16 tone mixtures in batches of 4 are 400
// updates), so the last update of a capped stage gets almost lr_min, not 99.8 % of the initial
// rate.
TEST_F(TrainingRun, CosineAnnealsOverTheStagesMaxSteps) {
  auto result = train("exp", "--max-steps=12 --set trainer.cfg:trainer:lr_schedule=cosine"
                             " --set trainer.cfg:trainer:learning_rate_decay=1"
                             " --set trainer.cfg:trainer:valid_adapt=False");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  auto rates = training_values_by_step(dir_ / "exp/100/metrics.jsonl", "lr");
  ASSERT_EQ(rates.size(), 12u) << result.output;
  const double initial = rates.at(1);  // update n is the schedule's step n - 1
  const double pi = std::acos(-1.0);
  for (const auto& [update, rate] : rates)
    EXPECT_NEAR(rate, initial * 0.5 * (1 + std::cos(pi * (update - 1) / 12.0)), 1e-12 * initial)
        << "update " << update;
  EXPECT_LT(rates.at(12), 0.02 * initial);
}
