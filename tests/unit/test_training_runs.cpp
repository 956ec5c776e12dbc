// Whole `nabu train` runs on a synthetic corpus, for what only a real run shows: resume after
// SIGKILL ends bit-identical, accumulated minibatches equal one large batch, two data-parallel
// workers equal one worker that aggregates twice as many minibatches, a dead worker stops the
// run, and a diverging loss stops with the task and step named.
#include <gtest/gtest.h>
#include <signal.h>
#include <sndfile.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>
#include <random>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "nabu/neuralnetworks/trainers/sweep_file.h"
#include "nabu/core/config.h"
#include "nabu/core/error.h"
#include "nabu/distributed/process_group.h"
#include "nabu/neuralnetworks/trainers/checkpoint.h"
#include "nabu/neuralnetworks/trainers/model_snapshots.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/audio_stream.h"
#include "nabu/core/strings.h"
#include "test_helpers.h"
#include "training_fixture.h"

using namespace nabu;
using namespace nabu::testing;
namespace fs = std::filesystem;

namespace nabu::testing {

void expect_resume_after_sigkill_bit_identical(const TempDir& dir_, const std::string& options) {
  auto train = [&](const std::string& expdir, const std::string& extra) {
    return run_nabu("train --expdir=" + expdir + " " + tiny_dc(extra), dir_.path());
  };
  auto parameters = [&](const std::string& checkpoint) {
    return load_checkpoint(dir_ / checkpoint, {}).parameters;
  };
  auto uninterrupted = train("exp_a", options);
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.output;

  // Killed without warning once a few checkpoints exist, in the middle of the first stage.
  kill_training_mid_first_stage(dir_, "exp_b", options);
  if (::testing::Test::HasFatalFailure()) return;

  // The seed, step limit and deterministic mode come from the first run's record.
  auto resumed = run_nabu("train --expdir=exp_b --resume --threads=1", dir_.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resum"), std::string::npos) << resumed.output;
  for (const std::string stage : {"100", "full"}) {
    expect_same_parameters(parameters("exp_a/" + stage + "/logdir/latest.pt"),
                           parameters("exp_b/" + stage + "/logdir/latest.pt"), 0.0);
    // Every update sees the same data and parameters: the updates the killed run made after
    // its last checkpoint are made again after the resume, with the same losses (the metrics
    // file holds them twice; the last record of a step is the resumed run's).
    auto a = training_losses_by_step(dir_ / ("exp_a/" + stage + "/metrics.jsonl"));
    auto b = training_losses_by_step(dir_ / ("exp_b/" + stage + "/metrics.jsonl"));
    EXPECT_EQ(a.size(), b.size()) << stage;
    for (const auto& [step, loss] : a) EXPECT_EQ(loss, b[step]) << stage << " update " << step;
  }
  EXPECT_EQ(nabu::testing::read_text(dir_ / "exp_a/val_sum.json"),
            nabu::testing::read_text(dir_ / "exp_b/val_sum.json"));
}

}  // namespace nabu::testing

// A stage whose segment length database.conf does not store is one line naming the section's
// key, before anything is written (it was a missing store file, after the experiment was made).
TEST_F(TrainingRun, AStageSegmentLengthTheDatabaseDoesNotStoreIsOneLineAndLeavesNothing) {
  auto result =
      train("exp_segments", "--max-steps=1 --set 'trainer.cfg:trainer:segment_lengths=200 full'");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("[trainspec] segment_lengths: '100 full' has no 200"),
            std::string::npos)
      << result.output;
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
  EXPECT_FALSE(fs::exists(dir_ / "exp_segments"));
}

// validation_segments = stage: the validation sets are read at the stage's length too, and a
// length their sections do not store is found before the experiment is made, not at the first
// validation.
TEST_F(TrainingRun, AStageSegmentLengthTheValidationSetsDoNotStoreIsOneLineAndLeavesNothing) {
  std::string training_stores;
  for (const std::string section : {"trainspec", "traintargets", "trainusedbins"})
    training_stores += " --set 'database.conf:" + section + ":segment_lengths=100 200 full'";
  auto result = train("exp_segments", "--max-steps=1 --set 'trainer.cfg:trainer:segment_lengths=200 "
                                      "full'" + training_stores);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("[devspec] segment_lengths: '100 full' has no 200"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("of validation task task_2spk"), std::string::npos)
      << result.output;
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
  EXPECT_FALSE(fs::exists(dir_ / "exp_segments"));
}

TEST_F(TrainingRun, ResumeAfterSigkillEndsBitIdentical) {
  expect_resume_after_sigkill_bit_identical(
      dir_, "--max-steps=30 --set trainer.cfg:trainer:valid_frequency=5");
}

TEST_F(TrainingRun, DynamicMixingTrainsOnNewMixturesAndResumesAtTheExactStep) {
  const std::string mixing = " --set trainer.cfg:trainer:dynamic_mixing=True";
  // The same updates after a SIGKILL and --resume: the mixtures are a function of the position.
  expect_resume_after_sigkill_bit_identical(
      dir_, "--max-steps=30 --set trainer.cfg:trainer:valid_frequency=5" + mixing);
  auto log = nabu::testing::read_text(dir_ / "exp_a/run.log");
  EXPECT_NE(log.find("dynamic mixing: 16 new mixtures per epoch, 2 sources each, from 32 "
                     "utterances of 32 speakers"),
            std::string::npos)
      << log;
  // Not the stored mixtures: the first updates' losses differ from a run on the stores.
  auto stored = train("exp_stored", "--max-steps=30 --set trainer.cfg:trainer:valid_frequency=5");
  ASSERT_EQ(stored.exit_code, 0) << stored.output;
  auto a = training_losses_by_step(dir_ / "exp_a/100/metrics.jsonl");
  auto b = training_losses_by_step(dir_ / "exp_stored/100/metrics.jsonl");
  EXPECT_NE(a[1], b[1]);
  EXPECT_NE(a[2], b[2]);
}

TEST_F(TrainingRun, ResumeAcceptsTheRecordedOverridesAndRejectsAChangedOne) {
  const std::string sets = "--max-steps=2 --set trainer.cfg:trainer:valid_frequency=1000"
                           " --set model.cfg:main:num_layers=1";
  auto first = train("exp_r", sets);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // The same command with --resume (the overrides in another order) continues.
  auto again = run_nabu("train --expdir=exp_r --resume --threads=1 --set model.cfg:main:num_layers=1"
                        " --set trainer.cfg:trainer:valid_frequency=1000",
                        dir_.path());
  EXPECT_EQ(again.exit_code, 0) << again.output;
  auto changed = run_nabu("train --expdir=exp_r --resume --threads=1"
                          " --set model.cfg:main:num_layers=2",
                          dir_.path());
  EXPECT_EQ(changed.exit_code, 1) << changed.output;
  EXPECT_NE(changed.output.find("--set model.cfg:main:num_layers: the experiment in exp_r was "
                                "started with '1', now '2'"),
            std::string::npos)
      << changed.output;
  auto added = run_nabu("train --expdir=exp_r --resume --threads=1 --set model.cfg:main:dropout=0.5",
                        dir_.path());
  EXPECT_EQ(added.exit_code, 1) << added.output;
  EXPECT_NE(added.output.find("was started without it"), std::string::npos) << added.output;
}

// A key given twice trains with its last value (as the original's parser reads a file), and the
// very same command with --resume compares that value, not the first.
TEST_F(TrainingRun, ResumeComparesTheLastOfARepeatedOverride) {
  const std::string sets = "--max-steps=2 --set trainer.cfg:trainer:valid_frequency=1000"
                           " --set model.cfg:main:num_units=24 --set model.cfg:main:num_units=32";
  auto first = train("exp_twice", sets);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(read_text(dir_ / "exp_twice/model.cfg").find("num_units = 32\n"), std::string::npos);
  auto again = run_nabu("train --expdir=exp_twice --resume " + tiny_dc(sets), dir_.path());
  EXPECT_EQ(again.exit_code, 0) << again.output;
  auto changed = run_nabu(
      "train --expdir=exp_twice --resume " + tiny_dc(sets + " --set model.cfg:main:num_units=24"),
      dir_.path());
  EXPECT_EQ(changed.exit_code, 1) << changed.output;
  EXPECT_NE(changed.output.find("--set model.cfg:main:num_units: the experiment in exp_twice was "
                                "started with '32', now '24'"),
            std::string::npos)
      << changed.output;
}

TEST_F(TrainingRun, GoingBackRestoresTheModelButTheDataMovesOn) {
  // A learning rate so large that every validation after the first is worse: each one goes back
  // to the step-0 model. The original restores only the model, so the updates after going back
  // see new data and give new validation losses; replaying the same data would repeat them.
  auto result = train("exp_back", "--max-steps=20 --set trainer.cfg:trainer:valid_frequency=2"
                                  " --set trainer.cfg:trainer:go_back=True"
                                  " --set trainer.cfg:trainer:num_tries=5"
                                  " --set 'trainer.cfg:trainer:initial_learning_rate=0.5 0.5'");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("going back to the model validated at step 0"), std::string::npos)
      << result.output;
  // After every go_back, the next validation sees a model trained on other data: a different
  // loss (replaying the same updates would give the same loss again, bit for bit).
  // Which stage goes back first depends on the last bits of the arithmetic (the BLAS kernels of
  // the machine), so both stages are looked at.
  int checked = 0;
  for (const std::string stage : {"100", "full"}) {
    std::ifstream in(dir_ / "exp_back" / stage / "metrics.jsonl");
    std::vector<std::pair<double, bool>> validations;  // loss, went back
    for (std::string line; std::getline(in, line);) {
      auto record = nlohmann::json::parse(line);
      if (record["type"] == "validation")
        validations.emplace_back(record["loss"].get<double>(), record["go_back"].get<bool>());
    }
    for (std::size_t i = 0; i + 1 < validations.size(); ++i) {
      if (!validations[i].second) continue;
      EXPECT_NE(validations[i + 1].first, validations[i].first)
          << stage << ": validation " << i + 1;
      ++checked;
    }
  }
  EXPECT_GE(checked, 1) << result.output;
}

TEST_F(TrainingRun, AccumulatedMinibatchesEqualOneLargeBatch) {
  // File order, two updates: 2 minibatches of 4 segments against 1 batch of the same 8. The
  // training loss of update 2 is computed with the parameters that update 1 produced, on the
  // same 8 segments in both runs, so equal losses mean equal updates.
  const std::string common = "--max-steps=2 --set trainer.cfg:trainer:shuffle=False"
                             " --set trainer.cfg:trainer:valid_frequency=1000";
  auto accumulated = train("exp_acc", common + " --set 'trainer.cfg:trainer:numbatches_to_aggregate=2 1'");
  ASSERT_EQ(accumulated.exit_code, 0) << accumulated.output;
  auto large = train("exp_large", common + " --set 'trainer.cfg:trainer:batch_size=8 2'");
  ASSERT_EQ(large.exit_code, 0) << large.output;
  auto acc_losses = training_losses_by_step(dir_ / "exp_acc/100/metrics.jsonl");
  auto large_losses = training_losses_by_step(dir_ / "exp_large/100/metrics.jsonl");
  ASSERT_EQ(acc_losses.size(), 2u);
  ASSERT_EQ(large_losses.size(), 2u);
  EXPECT_NE(large_losses[1], large_losses[2]) << "the first update changed nothing";
  for (int64_t step = 1; step <= 2; ++step)
    EXPECT_NEAR(acc_losses[step], large_losses[step], 1e-5 * std::abs(large_losses[step]))
        << "update " << step;
}

TEST_F(TrainingRun, TrainerCfgMaxStepsCapsEachStageAndTheCommandLineReplacesIt) {
  const std::string common = "--set trainer.cfg:trainer:valid_frequency=1000";
  auto capped = train("exp_cap", common + " --set 'trainer.cfg:trainer:max_steps=3 2'");
  ASSERT_EQ(capped.exit_code, 0) << capped.output;
  EXPECT_NE(capped.output.find("max_steps reached"), std::string::npos) << capped.output;
  EXPECT_EQ(training_losses_by_step(dir_ / "exp_cap/100/metrics.jsonl").size(), 3u);
  EXPECT_EQ(training_losses_by_step(dir_ / "exp_cap/full/metrics.jsonl").size(), 2u);

  auto replaced = train("exp_cli", common + " --set 'trainer.cfg:trainer:max_steps=3 2'"
                                            " --max-steps=1");
  ASSERT_EQ(replaced.exit_code, 0) << replaced.output;
  EXPECT_EQ(training_losses_by_step(dir_ / "exp_cli/100/metrics.jsonl").size(), 1u);
  EXPECT_EQ(training_losses_by_step(dir_ / "exp_cli/full/metrics.jsonl").size(), 1u);

  auto bad = train("exp_bad", common + " --set trainer.cfg:trainer:max_steps=-5");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("error: --set: [trainer] max_steps: must be -1"), std::string::npos)
      << bad.output;
  EXPECT_FALSE(fs::exists(dir_ / "exp_bad/100/metrics.jsonl"));
}

TEST_F(TrainingRun, AStageEndingBetweenValidationsValidatesItsLastStep) {
  // The stage keeps its best validated model: without a validation at the last step, the updates
  // after the last one would be thrown away. A last step that was validated anyway is not
  // validated twice.
  auto validated_steps = [&](const std::string& expdir) {
    std::vector<int64_t> steps;
    std::ifstream in(dir_ / expdir / "100" / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      auto record = nlohmann::json::parse(line);
      if (record["type"] == "validation") steps.push_back(record["step"].get<int64_t>());
    }
    return steps;
  };
  auto between = train("exp_last", "--max-steps=3 --set trainer.cfg:trainer:valid_frequency=2");
  ASSERT_EQ(between.exit_code, 0) << between.output;
  EXPECT_EQ(validated_steps("exp_last"), (std::vector<int64_t>{0, 2, 3})) << between.output;
  auto on = train("exp_on", "--max-steps=4 --set trainer.cfg:trainer:valid_frequency=2");
  ASSERT_EQ(on.exit_code, 0) << on.output;
  EXPECT_EQ(validated_steps("exp_on"), (std::vector<int64_t>{0, 2, 4})) << on.output;
}

TEST_F(TrainingRun, ValidEverySecondsValidatesOnTimeOnEveryRank) {
  // Every update takes more than a microsecond: a validation after each, although
  // valid_frequency alone would validate only at step 0. Two workers must agree on it (they
  // count the chief's time), or the run would hang in mismatched collectives.
  const std::string options = "--max-steps=3 --set trainer.cfg:trainer:valid_frequency=1000"
                              " --set trainer.cfg:trainer:valid_every_seconds=0.000001";
  for (const std::string workers : {"1", "2"}) {
    auto result = train("exp_seconds" + workers,
                        options + " --workers=" + workers + " --dist-timeout=60");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_EQ(validation_losses(dir_ / ("exp_seconds" + workers + "/100/metrics.jsonl")).size(), 4u)
        << workers << " worker(s)\n" << result.output;
  }
  auto bad = train("exp_seconds_bad", "--set trainer.cfg:trainer:valid_every_seconds=-1");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("valid_every_seconds: must not be negative"), std::string::npos)
      << bad.output;
}

TEST(ModelSnapshots, AverageOfParameterFilesIsTheElementwiseMean) {
  nabu::testing::TempDir dir;
  nabu::write_parameter_file(dir / "a.pt", {{"m.w", torch::tensor({1.0f, 2.0f})},
                                             {"m.b", torch::tensor({4.0f})}});
  nabu::write_parameter_file(dir / "b.pt", {{"m.w", torch::tensor({3.0f, 6.0f})},
                                             {"m.b", torch::tensor({0.0f})}});
  auto mean = nabu::average_parameter_files({dir / "a.pt", dir / "b.pt"});
  EXPECT_TRUE(torch::equal(mean.at("m.w"), torch::tensor({2.0f, 4.0f})));
  EXPECT_TRUE(torch::equal(mean.at("m.b"), torch::tensor({2.0f})));
  EXPECT_EQ(mean.at("m.w").scalar_type(), torch::kFloat32);
  nabu::write_parameter_file(dir / "c.pt", {{"m.w", torch::tensor({1.0f})},
                                             {"m.b", torch::tensor({4.0f})}});
  EXPECT_NE(error_of([&] { nabu::average_parameter_files({dir / "a.pt", dir / "c.pt"}); })
                .find("parameter m.w has another shape"),
            std::string::npos);
}

TEST_F(TrainingRun, AverageCheckpointsExportEveryAndKeptCheckpoints) {
  // Without go_back every step is validated once, so the kept losses are the two lowest logged.
  auto result = train("exp_avg", "--max-steps=4 --set trainer.cfg:trainer:valid_frequency=1"
                                 " --set trainer.cfg:trainer:go_back=False"
                                 " --set test_evaluator.cfg:task_2spk:batch_size=2"
                                 " --set test_evaluator.cfg:task_2spk_real:batch_size=2"
                                 " --set trainer.cfg:trainer:average_checkpoints=2"
                                 " --set trainer.cfg:trainer:export_every=2"
                                 " --set trainer.cfg:trainer:keep_checkpoint_every_hours=1e-9");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const fs::path stage = dir_ / "exp_avg/full";
  // The two lowest validation losses are the ones kept, and the average is their mean.
  auto losses = validation_losses(stage / "metrics.jsonl");
  ASSERT_GE(losses.size(), 2u);
  std::sort(losses.begin(), losses.end());
  auto index = nlohmann::json::parse(nabu::testing::read_text(stage / "model/best/best.json"));
  ASSERT_EQ(index.size(), 2u);
  EXPECT_NEAR(index[0]["loss"].get<double>(), losses[0], 1e-9);
  EXPECT_NEAR(index[1]["loss"].get<double>(), losses[1], 1e-9);
  std::vector<fs::path> best;
  for (const auto& entry : index) best.push_back(stage / "model/best" / entry["file"].get<std::string>());
  EXPECT_EQ(std::distance(fs::directory_iterator(stage / "model/best"), fs::directory_iterator()), 3);
  auto expected = nabu::average_parameter_files(best);
  auto average = nabu::read_parameter_file(stage / "model/model_avg.pt");
  for (const auto& [name, tensor] : expected)
    EXPECT_TRUE(torch::allclose(average.at(name), tensor)) << name;
  EXPECT_TRUE(fs::exists(stage / "model/export/model_step2.pt"));
  EXPECT_TRUE(fs::exists(stage / "model/export/model_step4.pt"));
  EXPECT_FALSE(fs::exists(stage / "model/export/model_step3.pt"));
  EXPECT_FALSE(fs::is_empty(stage / "logdir/kept"));

  auto tested = run_nabu("test --expdir=exp_avg --threads=1 --model=avg", dir_.path());
  ASSERT_EQ(tested.exit_code, 0) << tested.output;
  EXPECT_NE(tested.output.find("model_avg.pt"), std::string::npos) << tested.output;
  EXPECT_TRUE(fs::exists(dir_ / "exp_avg/test_avg/results_task_2spk_sdr_summary.json"));
  auto wrong = run_nabu("test --expdir=exp_avg --threads=1 --model=mean", dir_.path());
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.output.find("--model=mean: expected final (model.pt), avg (model_avg.pt), "
                              "step<N>"),
            std::string::npos)
      << wrong.output;
  // One update's export: tested apart, and the same model as that update's parameters.
  auto step = run_nabu("test --expdir=exp_avg --threads=1 --task=task_2spk --model=step2",
                       dir_.path());
  ASSERT_EQ(step.exit_code, 0) << step.output;
  EXPECT_NE(step.output.find("full/model/export/model_step2.pt"), std::string::npos)
      << step.output;
  EXPECT_TRUE(fs::exists(dir_ / "exp_avg/test_step2/results_task_2spk_sdr_summary.json"));
  auto step4 = run_nabu("test --expdir=exp_avg --threads=1 --task=task_2spk --model=step4",
                        dir_.path());
  ASSERT_EQ(step4.exit_code, 0) << step4.output;
  auto summary = [&](const std::string& folder) {
    return nabu::testing::read_text(dir_ / "exp_avg" / folder /
                                    "results_task_2spk_sdr_summary.json");
  };
  EXPECT_NE(summary("test_step2"), summary("test_step4"));
  // The mean of updates 2 and 4: another model than either, in its own folder.
  auto mean = run_nabu("test --expdir=exp_avg --threads=1 --task=task_2spk --model=avg1-4",
                       dir_.path());
  ASSERT_EQ(mean.exit_code, 0) << mean.output;
  EXPECT_NE(mean.output.find("model: the mean of 2 exports"), std::string::npos) << mean.output;
  EXPECT_NE(summary("test_avg1-4"), summary("test_step2"));
  EXPECT_NE(summary("test_avg1-4"), summary("test_step4"));
  // nabu export takes the mean too (this deep clustering model itself does not export).
  auto exported = run_nabu("export --expdir=exp_avg --model=avg2-4 --out=mean.pt", dir_.path());
  EXPECT_NE(exported.output.find("model: the mean of 2 exports"), std::string::npos)
      << exported.output;
  EXPECT_NE(exported.output.find("which the export does not script"), std::string::npos)
      << exported.output;
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {"--model=avg4-2", "--model=avg4-2: the first update must be below the last"},
           {"--model=avg3-4", "has 1 export(s) of updates 3 to 4 in one stage; averaging needs 2"},
           {"--model=avg2-4 --allow-early-testing", "exclude each other"}}) {
    auto refused = run_nabu("test --expdir=exp_avg --threads=1 " + flags, dir_.path());
    EXPECT_EQ(refused.exit_code, 1) << flags;
    EXPECT_NE(refused.output.find(message), std::string::npos) << flags << "\n" << refused.output;
  }
  auto missing = run_nabu("test --expdir=exp_avg --threads=1 --model=step3", dir_.path());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("--model=step3: no stage of "), std::string::npos)
      << missing.output;
  EXPECT_NE(missing.output.find("has model/export/model_step3.pt (trainer.cfg export_every"),
            std::string::npos)
      << missing.output;
  EXPECT_FALSE(fs::exists(dir_ / "exp_avg/test_step3"));
  auto both = run_nabu("test --expdir=exp_avg --threads=1 --model=step2 --allow-early-testing",
                       dir_.path());
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.output.find("--model=step2 and --allow-early-testing exclude each other"),
            std::string::npos)
      << both.output;
  auto bad = train("exp_avg_bad", "--set trainer.cfg:trainer:average_checkpoints=-2");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("average_checkpoints: must not be negative"), std::string::npos)
      << bad.output;
}

TEST_F(TrainingRun, TwoWorkersEqualOneWorkerAggregatingTwice) {
  const std::string common = "--max-steps=3 --set trainer.cfg:trainer:valid_frequency=1000";
  auto two = train("exp_two", common + " --workers=2 --dist-timeout=60");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("[rank 1]"), std::string::npos) << two.output;
  auto one = train("exp_one", common + " --set 'trainer.cfg:trainer:numbatches_to_aggregate=2 2'");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  // The stage models are the step-0 validated ones here; the training losses of updates 2 and 3
  // are computed with the parameters the earlier updates produced.
  for (const std::string stage : {"100", "full"}) {
    auto one_losses = training_losses_by_step(dir_ / ("exp_one/" + stage + "/metrics.jsonl"));
    auto two_losses = training_losses_by_step(dir_ / ("exp_two/" + stage + "/metrics.jsonl"));
    ASSERT_EQ(one_losses.size(), 3u) << stage;
    ASSERT_EQ(two_losses.size(), 3u) << stage;
    EXPECT_NE(one_losses[1], one_losses[3]) << stage;
    for (int64_t step = 1; step <= 3; ++step)
      EXPECT_NEAR(one_losses[step], two_losses[step], 1e-5 * std::abs(one_losses[step]))
          << stage << " update " << step;
    expect_same_parameters(parameters("exp_one/" + stage + "/logdir/latest.pt"),
                           parameters("exp_two/" + stage + "/logdir/latest.pt"), 1e-4);
  }
}

TEST_F(TrainingRun, DeadWorkerStopsTheRunWithAnError) {
  // Rank 1 of 2 alone: rank 0 never comes, so the rendezvous times out with a clear error.
  std::string orphan_command = "env MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                               std::to_string(29000 + ::getpid() % 1000) +
                               " WORLD_SIZE=2 RANK=1 '" + std::string(NABU_BINARY) +
                               "' train --expdir=exp_orphan --dist-timeout=3 " + tiny_dc("");
  auto started = std::chrono::steady_clock::now();
  auto orphan = run_shell(orphan_command, dir_.path());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 60.0);
  EXPECT_EQ(orphan.exit_code, 1) << orphan.output;
  EXPECT_NE(orphan.output.find("rendezvous"), std::string::npos) << orphan.output;

  // Two workers, rank 1 killed mid-run: the launcher stops rank 0 and exits non-zero.
  pid_t launcher = spawn_nabu("train --expdir=exp_killed --workers=2 --dist-timeout=30 " +
                                  tiny_dc("--set trainer.cfg:trainer:valid_frequency=5"),
                              dir_.path(), dir_ / "killed.log");
  auto metrics = dir_ / "exp_killed/100/metrics.jsonl";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (count_lines_with(metrics, "\"train\"") < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // The launcher's children are the workers; rank 1 is the second one started.
  std::string children = "/proc/" + std::to_string(launcher) + "/task/" + std::to_string(launcher) +
                         "/children";
  std::ifstream in(children);
  std::vector<pid_t> workers;
  for (pid_t child; in >> child;) workers.push_back(child);
  ASSERT_EQ(workers.size(), 2u) << nabu::testing::read_text(dir_ / "killed.log");
  auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(workers[1], SIGKILL), 0);
  int status = 0;
  ::waitpid(launcher, &status, 0);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  EXPECT_LT(seconds, 60.0);
  auto log = nabu::testing::read_text(dir_ / "killed.log");
  EXPECT_NE(log.find("worker 1 failed"), std::string::npos) << log;
}

TEST_F(TrainingRun, SlurmVariablesStartADistributedRun) {
  // Two processes as srun starts them: SLURM_PROCID/SLURM_NTASKS, the node list, the job id
  // giving the port.
  int job = 1000 + ::getpid() % 9000;
  auto slurm = [&](int rank) {
    return "env -u WORLD_SIZE -u RANK -u MASTER_ADDR -u MASTER_PORT SLURM_NTASKS=2 SLURM_PROCID=" +
           std::to_string(rank) + " SLURM_LOCALID=" + std::to_string(rank) +
           " SLURM_JOB_NODELIST=localhost SLURM_JOB_ID=" + std::to_string(job) + " '" +
           std::string(NABU_BINARY) + "' train --expdir=exp_slurm --dist-timeout=60 " +
           tiny_dc("--max-steps=2 --set trainer.cfg:trainer:valid_frequency=1000");
  };
  pid_t second = ::fork();
  if (second == 0) {
    std::string command = "cd '" + dir_.path().string() + "' && " + slurm(1) + " > slurm1.log 2>&1";
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto chief = run_shell(slurm(0), dir_.path());
  int status = 0;
  ::waitpid(second, &status, 0);
  EXPECT_EQ(chief.exit_code, 0) << chief.output;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << nabu::testing::read_text(dir_ / "slurm1.log");
  EXPECT_NE(chief.output.find("rank 0 of 2 (slurm variables; rendezvous localhost:" +
                              std::to_string(20000 + job % 20000) + ")"),
            std::string::npos)
      << chief.output;
  EXPECT_EQ(training_losses_by_step(dir_ / "exp_slurm/full/metrics.jsonl").size(), 2u);
}

TEST(SlurmNodeList, FirstHostOfCompressedLists) {
  EXPECT_EQ(first_slurm_host("localhost"), "localhost");
  EXPECT_EQ(first_slurm_host("node[01-04,07],gpu5"), "node01");
  EXPECT_EQ(first_slurm_host("gpu5,node[01-04]"), "gpu5");
  EXPECT_EQ(first_slurm_host("rack[3]-n[12-15]"), "rack3-n12");
  EXPECT_THROW(first_slurm_host(""), Error);
  EXPECT_THROW(first_slurm_host("node[01-04"), Error);
}

// Linked sets: every update runs one minibatch of every set and sums their weighted (loss, norm);
// validation weights each set by its weight over the first's. A second set of weight 0 changes
// nothing (the first set, named set0 as the default one, keeps its batch stream); weight 1 does.
TEST_F(TrainingRun, LinkedSetsAddTheirWeightedLosses) {
  const std::string run = " --max-steps=3,0 --set trainer.cfg:trainer:valid_frequency=2";
  auto linked = [](const std::string& weights) {
    std::string flags = " --set 'trainer.cfg:task_2spk:linkedsets=set0 extra'"
                        " --set 'trainer.cfg:task_2spk:linkedset_weighting=" + weights + "'"
                        " --set 'validation_evaluator.cfg:task_2spk:linkedsets=set0 extra'"
                        " --set 'validation_evaluator.cfg:task_2spk:linkedset_weighting=" +
                        weights + "'";
    // set0: the task's own sections; extra: the other split's.
    for (const auto& [name, train_section, dev_section] :
         std::vector<std::tuple<std::string, std::string, std::string>>{
             {"features", "trainspec", "devspec"},
             {"binary_targets", "traintargets", "devtargets"},
             {"usedbins", "trainusedbins", "devusedbins"}}) {
      flags += " --set trainer.cfg:task_2spk:set0_" + name + "=" + train_section;
      flags += " --set trainer.cfg:task_2spk:extra_" + name + "=" + dev_section;
      flags += " --set validation_evaluator.cfg:task_2spk:set0_" + name + "=" + dev_section;
      flags += " --set validation_evaluator.cfg:task_2spk:extra_" + name + "=" + train_section;
    }
    return flags;
  };
  auto single = train("exp_single", run);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  auto ignored = train("exp_zero", run + linked("1.0 0.0"));
  ASSERT_EQ(ignored.exit_code, 0) << ignored.output;
  auto both = train("exp_both", run + linked("1.0 1.0"));
  ASSERT_EQ(both.exit_code, 0) << both.output;

  expect_same_parameters(parameters("exp_single/100/logdir/latest.pt"),
                         parameters("exp_zero/100/logdir/latest.pt"), 1e-6);
  auto single_validation = validation_losses(dir_ / "exp_single/100/metrics.jsonl");
  auto zero_validation = validation_losses(dir_ / "exp_zero/100/metrics.jsonl");
  ASSERT_EQ(single_validation.size(), zero_validation.size());
  for (std::size_t i = 0; i < single_validation.size(); ++i)
    EXPECT_NEAR(zero_validation[i], single_validation[i], 1e-6 * std::abs(single_validation[i]));
  auto both_losses = training_losses_by_step(dir_ / "exp_both/100/metrics.jsonl");
  auto single_losses = training_losses_by_step(dir_ / "exp_single/100/metrics.jsonl");
  EXPECT_NE(both_losses.at(1), single_losses.at(1));
  auto both_validation = validation_losses(dir_ / "exp_both/100/metrics.jsonl");
  EXPECT_NE(both_validation.front(), single_validation.front());

  // Each set's own loss is logged, unweighted: with weight 0 the first set's is the total (the
  // single run's), and the second's is still evaluated (the training split's, lower here).
  std::vector<std::pair<double, double>> zero_sets;
  std::ifstream metrics(dir_ / "exp_zero/100/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    auto record = nlohmann::json::parse(line);
    if (record["type"] != "validation") continue;
    ASSERT_TRUE(record.contains("set_losses")) << line;
    const auto& sets = record["set_losses"]["task_2spk"];
    zero_sets.emplace_back(sets["set0"].get<double>(), sets["extra"].get<double>());
  }
  ASSERT_EQ(zero_sets.size(), single_validation.size());
  for (std::size_t i = 0; i < zero_sets.size(); ++i) {
    EXPECT_NEAR(zero_sets[i].first, single_validation[i], 1e-6 * std::abs(single_validation[i]));
    EXPECT_TRUE(std::isfinite(zero_sets[i].second));
    EXPECT_GT(std::abs(zero_sets[i].second - zero_sets[i].first),
              1e-6 * std::abs(zero_sets[i].first));
  }
  EXPECT_NE(ignored.output.find("; sets extra "), std::string::npos) << ignored.output;
  EXPECT_EQ(single.output.find("; sets "), std::string::npos) << single.output;
  // tools/plot_metrics --table lists them per validation, and each one's lowest.
  auto table = run_shell(source_dir().string() + "/tools/plot_metrics exp_zero --out zero.png "
                         "--table", dir_.path());
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("stage\tstep\tloss\textra\tset0\n"), std::string::npos)
      << table.output;
  char first_row[128];
  std::snprintf(first_row, sizeof first_row, "100\t0\t%.6g\t%.6g\t%.6g\n", zero_validation[0],
                zero_sets[0].second, zero_sets[0].first);
  EXPECT_NE(table.output.find(first_row), std::string::npos) << first_row << table.output;
  EXPECT_NE(table.output.find("# lowest set0: "), std::string::npos) << table.output;

  // One weight per set, or a clear error.
  auto wrong = train("exp_wrong", run + linked("1.0"));
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.output.find("linkedset_weighting"), std::string::npos) << wrong.output;
}

// The original's validation rules with two tasks (docs/trainer.md, "Validation"): every task
// validates on the minimum of the tasks' batch counts, tasks_excluded_for_val takes a task out,
// and evaluator = None trains without validation and still writes the stage's model.
TEST_F(TrainingRun, ValidationBatchMinimumTasksExcludedForValAndEvaluatorNone) {
  // task_b is task_2spk on the training split: 16 mixtures (4 validation batches of 4) against
  // the 4 of the validation split (1 batch).
  auto task = [](const std::string& split, const std::string& dev) {
    return "[task_b]\nloss_type = deepclustering\ninputs = features\noutputs = bin_emb\n"
           "nodes = n0 bin_emb\nn0_model = main\nn0_inputs = features\n"
           "bin_emb_model = outlayer\nbin_emb_inputs = n0\nfeatures = " + split + "spec\n"
           "targets = binary_targets usedbins\nbinary_targets = " + split + "targets\n"
           "usedbins = " + split + "usedbins\n" + dev + "\n[task_2spk]";
  };
  auto recipe = copy_recipe(dc_recipe(), dir_,
                            {{"trainer.cfg", {"tasks = task_2spk", "tasks = task_2spk task_b"}},
                             {"trainer.cfg", {"[task_2spk]", task("train", "")}},
                             {"validation_evaluator.cfg",
                              {"[task_2spk]", task("train", "validation_metric = loss\n")}}});
  auto train_copy = [&](const std::string& expdir, const std::string& extra) {
    return run_nabu("train --expdir=" + expdir + " --recipe=" + recipe.string() +
                        " --threads=1 --seed=3 --deterministic"
                        " --set model.cfg:main:num_units=8 --set model.cfg:main:input_noise=0"
                        " --set validation_evaluator.cfg:evaluator:batch_size=4"
                        " --set 'trainer.cfg:trainer:batch_size=4 2' --max-steps=2,0"
                        " --set trainer.cfg:trainer:valid_frequency=1000 " + extra,
                    dir_.path());
  };
  auto first_validation = [&](const std::string& expdir) {
    std::ifstream in(dir_ / expdir / "100/metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      auto record = nlohmann::json::parse(line);
      if (record["type"] == "validation") return record;
    }
    ADD_FAILURE() << "no validation in " << expdir;
    return nlohmann::json();
  };

  auto both = train_copy("exp_both", "");
  ASSERT_EQ(both.exit_code, 0) << both.output;
  EXPECT_NE(both.output.find("validation: 2 task(s), 1 batch(es) each"), std::string::npos)
      << both.output;
  auto both_record = first_validation("exp_both");
  ASSERT_TRUE(both_record["task_losses"].contains("task_2spk")) << both_record.dump();
  ASSERT_TRUE(both_record["task_losses"].contains("task_b")) << both_record.dump();

  auto alone = train_copy("exp_alone",
                          "--set validation_evaluator.cfg:evaluator:tasks_excluded_for_val=task_2spk");
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  EXPECT_NE(alone.output.find("validation: 1 task(s), 4 batch(es) each"), std::string::npos)
      << alone.output;
  auto alone_record = first_validation("exp_alone");
  EXPECT_FALSE(alone_record["task_losses"].contains("task_2spk")) << alone_record.dump();
  // Its total is task_b's loss alone, over its 4 batches; with both it read only the first.
  EXPECT_DOUBLE_EQ(alone_record["loss"].get<double>(),
                   alone_record["task_losses"]["task_b"].get<double>());
  EXPECT_NE(alone_record["task_losses"]["task_b"].get<double>(),
            both_record["task_losses"]["task_b"].get<double>());
  // The same validation limited to one batch by requested_utts gives the value read with both.
  auto one_batch = train_copy("exp_one_batch",
                              "--set validation_evaluator.cfg:evaluator:tasks_excluded_for_val=task_2spk"
                              " --set validation_evaluator.cfg:evaluator:requested_utts=4");
  ASSERT_EQ(one_batch.exit_code, 0) << one_batch.output;
  EXPECT_NEAR(first_validation("exp_one_batch")["task_losses"]["task_b"].get<double>(),
              both_record["task_losses"]["task_b"].get<double>(),
              1e-6 * std::abs(both_record["task_losses"]["task_b"].get<double>()));

  auto none = train_copy("exp_none", "--set validation_evaluator.cfg:evaluator:evaluator=None");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_NE(none.output.find("validation disabled (evaluator = None)"), std::string::npos)
      << none.output;
  EXPECT_TRUE(validation_losses(dir_ / "exp_none/100/metrics.jsonl").empty());
  EXPECT_EQ(training_losses_by_step(dir_ / "exp_none/100/metrics.jsonl").size(), 2u);
  EXPECT_TRUE(fs::exists(dir_ / "exp_none/100/model/model.pt"));
  EXPECT_TRUE(fs::exists(dir_ / "exp_none/full/model/model.pt"));
}

// A second `nabu train` into an experiment is refused; --overwrite starts it over: the old
// stages, their checkpoints and the record of the stores it read are gone first.
TEST_F(TrainingRun, OverwriteStartsTheExperimentOverAndWithoutItASecondRunIsRefused) {
  const std::string run = "--set trainer.cfg:trainer:valid_frequency=1000";
  ASSERT_EQ(train("exp", run + " --max-steps=1,0").exit_code, 0);
  write_text(dir_ / "exp/100/logdir/stale.marker", "from the first run");
  auto again = train("exp", run + " --max-steps=1,0");
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("already holds a training; continue it with --resume, start over "
                              "with --overwrite"),
            std::string::npos)
      << again.output;
  EXPECT_TRUE(fs::exists(dir_ / "exp/100/logdir/stale.marker"));
  write_text(dir_ / "exp/stores.json", "{\"not\": \"a record of these stores\"}");
  write_text(dir_ / "exp/tensorboard/100/stale.marker", "the first run's curves");
  auto over = train("exp", run + " --overwrite --max-steps=2,0");
  ASSERT_EQ(over.exit_code, 0) << over.output;
  EXPECT_FALSE(fs::exists(dir_ / "exp/100/logdir/stale.marker"));
  EXPECT_FALSE(fs::exists(dir_ / "exp/tensorboard/100/stale.marker"));
  EXPECT_FALSE(fs::is_empty(dir_ / "exp/tensorboard/100"));  // this run's event file
  auto losses = training_losses_by_step(dir_ / "exp/100/metrics.jsonl");
  ASSERT_EQ(losses.size(), 2u);  // a fresh metrics.jsonl, not the first run's plus two
  EXPECT_EQ(losses.begin()->first, 1);
  EXPECT_EQ(read_text(dir_ / "exp/stores.json").find("\"not\""), std::string::npos);
}

TEST_F(TrainingRun, DivergingLossStopsNamingTaskAndStep) {
  auto result = train("exp_nan", "--max-steps=50 --set trainer.cfg:trainer:valid_frequency=1000"
                                 " --set 'trainer.cfg:trainer:initial_learning_rate=1e38 1e38'");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("task task_2spk"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("at step"), std::string::npos) << result.output;
  // The model validated at step 0 is intact.
  auto validated = parameters("exp_nan/100/logdir/validated.pt");
  for (const auto& [name, tensor] : validated)
    EXPECT_TRUE(torch::isfinite(tensor).all().item<bool>()) << name;
}

TEST_F(TrainingRun, TestAndSeparateWriteSeparatedSignals) {
  auto trained = train("exp_sep", "--max-steps=2 --set trainer.cfg:trainer:valid_frequency=1000"
                                  " --set test_evaluator.cfg:task_2spk:batch_size=2"
                                 " --set test_evaluator.cfg:task_2spk_real:batch_size=2");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  auto tested = run_nabu("test --expdir=exp_sep --threads=1", dir_.path());
  ASSERT_EQ(tested.exit_code, 0) << tested.output;
  EXPECT_TRUE(fs::exists(dir_ / "exp_sep/test/reconstructions/task_2spk/s2/tt_3.wav"));
  auto summary = nlohmann::json::parse(
      nabu::testing::read_text(dir_ / "exp_sep/test/results_task_2spk_sdr_summary.json"));
  EXPECT_TRUE(summary["SDR"]["SS"]["all"]["mean"].is_number());

  // The same test set separated from its audio in overlapping chunks, as nabu separate does.
  auto chunked = run_nabu("test --expdir=exp_sep --threads=1 --chunk-seconds=0.5 "
                          "--overlap-seconds=0.1", dir_.path());
  ASSERT_EQ(chunked.exit_code, 0) << chunked.output;
  auto chunked_summary = nlohmann::json::parse(nabu::testing::read_text(
      dir_ / "exp_sep/test_chunks_0.5s/results_task_2spk_sdr_summary.json"));
  EXPECT_TRUE(chunked_summary["SDR"]["SS"]["all"]["mean"].is_number());

  // sdr_snr: the recipe copy gets a noise reference per test utterance; SNR of the estimates and
  // of the mixture (which holds no such noise) are summarised next to SDR.
  std::string noise_list;
  for (int i = 0; i < 4; ++i) {
    std::string name = "tt_" + std::to_string(i);
    nabu::testing::write_noise_wav(dir_ / ("noise/" + name + ".wav"), 40000, 60 + i);
    noise_list += name + " noise/" + name + ".wav\n";
  }
  write_text(dir_ / "noise.scp", noise_list);
  write_text(dir_ / "exp_sep/database.conf",
             nabu::testing::read_text(dir_ / "exp_sep/database.conf") +
                 // Relative to the experiment folder (docs/ini_semantics.md, "Paths").
                 "\n[testnoise]\ndatafiles = ../noise.scp\npreprocess = False\n"
                 "processor_config = score_processor.cfg\n");
  auto with_noise = run_nabu("test --expdir=exp_sep --threads=1 "
                             "--set 'scorer.cfg:task_2spk:score_type=sdr sdr_snr' "
                             "--set scorer.cfg:task_2spk:noise=testnoise",
                             dir_.path());
  ASSERT_EQ(with_noise.exit_code, 0) << with_noise.output;
  auto snr_summary = nlohmann::json::parse(nabu::testing::read_text(
      dir_ / "exp_sep/test/results_task_2spk_sdr_snr_summary.json"));
  EXPECT_TRUE(snr_summary["SNR"]["SS"]["all"]["mean"].is_number()) << snr_summary.dump();
  EXPECT_NEAR(snr_summary["SDR"]["SS"]["all"]["mean"].get<double>(),
              summary["SDR"]["SS"]["all"]["mean"].get<double>(), 1e-6);
  auto no_noise_section = run_nabu("test --expdir=exp_sep --threads=1 "
                                   "--set scorer.cfg:task_2spk:score_type=sdr_snr",
                                   dir_.path());
  EXPECT_EQ(no_noise_section.exit_code, 1);
  EXPECT_NE(no_noise_section.output.find("noise"), std::string::npos) << no_noise_section.output;

  // A 16 kHz stereo recording: the test mixture upsampled, the right channel at half level.
  const std::string mixture = "data/corpus/2speakers/wav8k/min/tt/mix/tt_0.wav";
  auto input = read_audio((dir_ / mixture).string());
  nabu::Resampler upsample(8000, 16000);
  auto flat = input.samples.contiguous();
  auto high = upsample.process(
      std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel()));
  auto rest = upsample.flush();
  high.insert(high.end(), rest.begin(), rest.end());
  {
    std::vector<double> left, right;
    for (double value : high) {
      left.push_back(value / 32768);
      right.push_back(value / 65536);
    }
    write_multichannel_wav(dir_ / "stereo16k.wav", {left, right}, 16000);
  }
  auto separated = run_nabu("separate --expdir=exp_sep --out=separated --threads=1 "
                            "--chunk-seconds=0.5 --overlap-seconds=0.1 stereo16k.wav " + mixture,
                            dir_.path());
  ASSERT_EQ(separated.exit_code, 0) << separated.output;
  for (const std::string speaker : {"s1", "s2"}) {
    auto output = read_audio((dir_ / ("separated/tt_0_" + speaker + ".wav")).string());
    EXPECT_EQ(output.sample_rate, 8000);
    EXPECT_EQ(output.samples.size(0), input.samples.size(0)) << speaker;
    auto stereo = read_audio((dir_ / ("separated/stereo16k_" + speaker + ".wav")).string());
    EXPECT_EQ(stereo.sample_rate, 16000);
    EXPECT_EQ(stereo.samples.size(0), static_cast<int64_t>(high.size())) << speaker;
    EXPECT_TRUE(torch::isfinite(stereo.samples).all().item<bool>());
  }

  // Bad files: one line naming each, the good file is still separated, exit status 1, and
  // nothing is written for a bad one.
  write_text(dir_ / "not_audio.wav", "hello");
  write_pcm16_wav(dir_ / "empty.wav", {});
  write_pcm16_wav(dir_ / "zeros.wav", std::vector<short>(8000, 0));
  write_pcm16_wav(dir_ / "short.wav", std::vector<short>(100, 1000));
  {
    SF_INFO info{};
    info.samplerate = 8000;
    info.channels = 1;
    info.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
    SNDFILE* file = sf_open((dir_ / "nan.wav").c_str(), SFM_WRITE, &info);
    ASSERT_NE(file, nullptr);
    std::vector<float> samples(8000, 0.1f);
    samples[4000] = std::numeric_limits<float>::quiet_NaN();
    sf_writef_float(file, samples.data(), 8000);
    sf_close(file);
  }
  const std::vector<std::string> bad = {"missing.wav", "not_audio.wav", "empty.wav",
                                        "zeros.wav",   "short.wav",     "nan.wav"};
  auto failed = run_nabu("separate --expdir=exp_sep --out=bad_out --threads=1 " + join(bad, " ") +
                             " " + mixture,
                         dir_.path());
  EXPECT_EQ(failed.exit_code, 1) << failed.output;
  for (const auto& name : bad) EXPECT_NE(failed.output.find(name + ": "), std::string::npos) << name;
  for (const std::string what : {"no such file", "not a readable audio file", "empty",
                                 "silent", "too short: 0.013 s", "is NaN"})
    EXPECT_NE(failed.output.find(what), std::string::npos) << what << "\n" << failed.output;
  EXPECT_NE(failed.output.find("6 of 7 file(s) failed"), std::string::npos) << failed.output;
  std::set<std::string> written;
  for (const auto& entry : fs::directory_iterator(dir_ / "bad_out"))
    written.insert(entry.path().filename().string());
  EXPECT_EQ(written, (std::set<std::string>{"tt_0_s1.wav", "tt_0_s2.wav"}));
}

// docs/ini_semantics.md, "Paths": an experiment holds, or names by absolute path, everything it
// is used with, so it separates from any folder and when copied away from the data it was
// trained on (statistics, processor configs and sample rates copied into it).
TEST_F(TrainingRun, AnExperimentSeparatesFromAnyFolderAndWhenCopiedElsewhere) {
  auto trained = train("exp_portable", "--max-steps=1 --set trainer.cfg:trainer:valid_frequency=1000"
                                      " --set test_evaluator.cfg:task_2spk:batch_size=2"
                                      " --set test_evaluator.cfg:task_2spk_real:batch_size=2");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  auto copy = ConfigFile::load(dir_ / "exp_portable/database.conf");
  const auto& trainspec = copy.section("trainspec");
  EXPECT_EQ(trainspec.get_string("meanandvar_dir"), "statistics/trainspec");
  EXPECT_TRUE(fs::exists(dir_ / "exp_portable/statistics/trainspec/mvn_stats.h5"));
  EXPECT_EQ(trainspec.get_string("processor_config"), "feature_processor.cfg");
  EXPECT_TRUE(fs::path(trainspec.get_string("store_dir")).is_absolute());
  EXPECT_TRUE(fs::path(trainspec.get_string("datafiles")).is_absolute());
  EXPECT_EQ(trainspec.get_int("sample_rate"), 8000);

  // Copied to another folder, away from the corpus and stores, used from a third folder.
  fs::create_directories(dir_ / "laptop/work");
  fs::copy(dir_ / "exp_portable", dir_ / "laptop/exp", fs::copy_options::recursive);
  fs::copy_file(dir_ / "data/corpus/2speakers/wav8k/min/tt/mix/tt_1.wav",
                dir_ / "laptop/work/meeting.wav");
  // Tested from there: the stores and lists are named by absolute paths, and the relative paths
  // inside the lists are relative to where the training ran.
  auto tested = run_nabu("test --expdir=../exp --threads=1", dir_ / "laptop/work");
  ASSERT_EQ(tested.exit_code, 0) << tested.output;
  EXPECT_TRUE(fs::exists(dir_ / "laptop/exp/test/reconstructions/task_2spk/s1/tt_1.wav"));
  fs::rename(dir_ / "data", dir_ / "data_elsewhere");
  auto separated = run_nabu("separate --expdir=../exp --out=sep --threads=1 meeting.wav",
                            dir_ / "laptop/work");
  fs::rename(dir_ / "data_elsewhere", dir_ / "data");
  ASSERT_EQ(separated.exit_code, 0) << separated.output;
  for (const std::string speaker : {"s1", "s2"})
    EXPECT_TRUE(fs::exists(dir_ / ("laptop/work/sep/meeting_" + speaker + ".wav"))) << speaker;
}

TEST(SweepFile, BlocksOfOverridesSeparatedByBlankLines) {
  auto blocks = nabu::parse_sweep_text(
      "small\nmodel.cfg main num_units 64\ntrainer.cfg trainer batch_size 20 4\n\n\n"
      "deep\nmodel.cfg main num_layers 3\n",
      "sweep_file");
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].name, "small");
  EXPECT_EQ(blocks[0].descriptions(),
            (std::vector<std::string>{"model.cfg:main:num_units=64",
                                      "trainer.cfg:trainer:batch_size=20 4"}));
  EXPECT_EQ(blocks[1].name, "deep");
  ASSERT_EQ(blocks[1].overrides.size(), 1u);

  auto error_of = [](const std::string& text) {
    try {
      nabu::parse_sweep_text(text, "sweep_file");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("a\nmodel.cfg main\n").find("sweep_file:2"), std::string::npos);
  EXPECT_NE(error_of("a\nx y z 1\n\na\nx y z 2\n").find("used twice"), std::string::npos);
  EXPECT_NE(error_of("two words\nx y z 1\n").find("sweep_file:1"), std::string::npos);
  EXPECT_NE(error_of("\n\n").find("no experiment"), std::string::npos);
  auto reference = nabu::testing::reference_recipe_dir();
  if (!reference.empty()) {
    EXPECT_EQ(nabu::parse_sweep_file((reference / "sweep_file").string()).size(), 2u);
  }
}

TEST_F(TrainingRun, SweepTrainsEveryBlockAndSkipsFinishedOnes) {
  write_text(dir_ / "sweep_file",
             "units4\nmodel.cfg main num_units 4\n\nunits6\nmodel.cfg main num_units 6\n");
  const std::string command = "sweep --sweep=sweep_file --expdir=sweep --max-steps=2 " +
                              tiny_dc("--set trainer.cfg:trainer:valid_frequency=1");
  auto first = run_nabu(command, dir_.path());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto csv = nabu::testing::read_text(dir_ / "sweep/sweep_summary.csv");
  EXPECT_EQ(csv.rfind("name,100,full,status\n", 0), 0u) << csv;
  EXPECT_NE(csv.find("units4,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("units6,"), std::string::npos) << csv;
  EXPECT_NE(nabu::testing::read_text(dir_ / "sweep/units6/model.cfg").find("num_units = 6"),
            std::string::npos);
  auto again = run_nabu(command, dir_.path());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(nabu::testing::read_text(dir_ / "sweep/sweep_summary.csv").find("done before"),
            std::string::npos);
}

// validation_metric = si_sdr: every validation reconstructs and scores the whole validation
// utterances, selects on the score, and the kept model's score is what `nabu test` measures on the
// same utterances; an extra validation set is logged beside it and selects nothing.
TEST_F(TrainingRun, ValidationByMetricSelectsOnTheSiSdrThatNabuTestMeasures) {
  const std::string validation = read_text(fs::path(dc_recipe()) / "validation_evaluator.cfg");
  const std::string task_body = validation.substr(validation.find("[task_2spk]") + 11);
  auto recipe = copy_recipe(dc_recipe(), dir_,
                            {{"validation_evaluator.cfg",
                              {"validation_metric = loss",
                               "validation_metric = si_sdr\nextra_validation_sets = cv_by_loss"}}});
  // The same validation data by loss, as a named extra set.
  write_text(recipe / "validation_evaluator.cfg",
             read_text(recipe / "validation_evaluator.cfg") + "\n[cv_by_loss]" + task_body);
  std::string options = tiny_dc("--max-steps=4,3 --set trainer.cfg:trainer:valid_frequency=2");
  options.replace(options.find(dc_recipe()), dc_recipe().size(), recipe.string());
  auto trained = run_nabu("train --expdir=exp_metric " + options, dir_.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("validation at step 2: si_sdr "), std::string::npos)
      << trained.output;
  EXPECT_NE(trained.output.find("; cv_by_loss: loss "), std::string::npos) << trained.output;

  int validations = 0;
  std::ifstream in(dir_ / "exp_metric/full/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto record = nlohmann::json::parse(line);
    if (record["type"] != "validation") continue;
    ++validations;
    double si_sdr = record["task_metrics"]["task_2spk"].get<double>();
    EXPECT_TRUE(std::isfinite(si_sdr) && si_sdr > -50 && si_sdr < 100) << line;
    // The track holds the negated score; the loss of the whole utterances is logged as well, and
    // equals the extra set's, which reads the same data by loss.
    EXPECT_DOUBLE_EQ(record["loss"].get<double>(), -si_sdr) << line;
    EXPECT_DOUBLE_EQ(record["task_losses"]["task_2spk"].get<double>(),
                     record["extra_sets"]["cv_by_loss"]["loss"].get<double>())
        << line;
  }
  EXPECT_EQ(validations, 3);  // steps 0, 2 and the last (3)

  // nabu test of the kept model on the validation utterances: its mean SI-SDR is the best
  // validation's score (val_sum.json holds the negated best, rounded to 1e-5).
  write_text(dir_ / "exp_metric/database.conf",
             read_text(dir_ / "exp_metric/database.conf") +
                 "\n[devbase]\ndatafiles = ../data/corpus/2speakers/wav8k/min/cv/mix_wav.scp\n"
                 "preprocess = False\nprocessor_config = base_processor.cfg\n"
                 "\n[devspkinfo]\ndatafiles = ../data/corpus/2speakers/wav8k/min/cv/utt_spkinfo.txt\n"
                 "preprocess = False\nmeta_info = True\noptional = True\n");
  auto tested = run_nabu(
      "test --expdir=exp_metric --threads=1 --task=task_2spk"
      " --set test_evaluator.cfg:task_2spk:features=devspec"
      " --set test_evaluator.cfg:task_2spk:binary_targets=devtargets"
      " --set test_evaluator.cfg:task_2spk:usedbins=devusedbins"
      " --set test_evaluator.cfg:task_2spk:batch_size=4"
      " --set reconstructor.cfg:task_2spk:org_mix=devorgmix"
      " --set reconstructor.cfg:task_2spk:usedbins=devusedbins"
      " --set scorer.cfg:task_2spk:org_src=devorgsrc --set scorer.cfg:task_2spk:base=devbase"
      " --set scorer.cfg:task_2spk:spkinfo=devspkinfo",
      dir_.path());
  ASSERT_EQ(tested.exit_code, 0) << tested.output;
  auto summary = nlohmann::json::parse(
      read_text(dir_ / "exp_metric/test/results_task_2spk_si_sdr_summary.json"));
  auto val_sum = nlohmann::json::parse(read_text(dir_ / "exp_metric/val_sum.json"));
  EXPECT_NEAR(summary["SI-SDR"]["SS"]["all"]["mean"].get<double>(),
              -val_sum["full"].get<double>(), 2e-5)
      << summary.dump() << "\n" << val_sum.dump();
}

// validation_segments = full validates a segmented stage on whole utterances (docs/trainer.md),
// so that stage needs no validation store cut at its segment length; a wrong value names the key.
TEST_F(TrainingRun, ValidationSegmentsFullReadsTheWholeUtterancesInASegmentedStage) {
  fs::remove_all(dir_ / "data/stores/toy2spk/features/cv/100");
  auto staged = train("exp_stage", "--max-steps=2,1");
  EXPECT_EQ(staged.exit_code, 1) << staged.output;
  EXPECT_NE(staged.output.find("features/cv/100/store.h5 does not exist"), std::string::npos)
      << staged.output;
  auto whole = train("exp_whole", "--max-steps=2,1 --set trainer.cfg:trainer:valid_frequency=1"
                                  " --set validation_evaluator.cfg:evaluator:validation_segments=full");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  // Both stages validate the same whole utterances: the 100-frame stage's best validation and
  // the full stage's first, of the model that stage kept, give the same loss.
  auto first = validation_losses(dir_ / "exp_whole/100/metrics.jsonl");
  auto second = validation_losses(dir_ / "exp_whole/full/metrics.jsonl");
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(second.empty());
  EXPECT_NEAR(*std::min_element(first.begin(), first.end()), second.front(),
              1e-6 * std::abs(second.front()));
  auto wrong = train("exp_wrong", "--max-steps=1,1"
                                  " --set validation_evaluator.cfg:evaluator:validation_segments=50");
  EXPECT_EQ(wrong.exit_code, 1) << wrong.output;
  EXPECT_NE(wrong.output.find("[evaluator] validation_segments: '50' is neither stage nor full"),
            std::string::npos)
      << wrong.output;
}

// validation_metric = pesq: each validation scores the reconstructed validation utterances by
// PESQ (narrow band at the recipe's 8 kHz), higher is better: the track holds the negated score.
TEST_F(TrainingRun, ValidationByPesqScoresTheReconstructedUtterances) {
  auto trained = run_nabu(
      "train --expdir=exp_pesq " +
          tiny_dc("--max-steps=2,1 --set validation_evaluator.cfg:task_2spk:validation_metric=pesq"
                  " --set validation_evaluator.cfg:task_2spk:metric_utts=2"),
      dir_.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("validation at step 0: pesq "), std::string::npos)
      << trained.output;
  int validations = 0;
  std::ifstream in(dir_ / "exp_pesq/full/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto record = nlohmann::json::parse(line);
    if (record["type"] != "validation") continue;
    ++validations;
    const double mos = record["task_metrics"]["task_2spk"].get<double>();
    EXPECT_GE(mos, 1.0) << line;
    EXPECT_LE(mos, 4.65) << line;
    EXPECT_DOUBLE_EQ(record["loss"].get<double>(), -mos) << line;
  }
  EXPECT_GE(validations, 2);
}

// Mistakes in the metric keys are one line naming file, section and key.
TEST_F(TrainingRun, ValidationMetricMistakesNameTheKey) {
  auto error = [&](const std::string& sets) {
    auto result = train("exp_bad", "--max-steps=1,1 " + sets);
    EXPECT_EQ(result.exit_code, 1) << result.output;
    return result.output;
  };
  auto unknown = error("--set validation_evaluator.cfg:task_2spk:validation_metric=mos");
  EXPECT_NE(unknown.find("[task_2spk] validation_metric"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("not one of loss, sdr, si_sdr, stoi, estoi, pesq, error_rate"),
            std::string::npos)
      << unknown;
  auto missing = error("--set validation_evaluator.cfg:task_2spk:validation_metric=si_sdr"
                       " --set validation_evaluator.cfg:task_2spk:metric_org_src=nosuchsection");
  EXPECT_NE(missing.find("metric_org_src: database.conf has no section [nosuchsection]"),
            std::string::npos)
      << missing;
  auto extra = error("--set validation_evaluator.cfg:task_2spk:extra_validation_sets=nothere");
  EXPECT_NE(extra.find("extra_validation_sets: validation_evaluator.cfg has no section [nothere]"),
            std::string::npos)
      << extra;
}
