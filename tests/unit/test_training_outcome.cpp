// A training whose validation never beats its start hands back its initialisation: nabu train
// says so at its end, each stage's metrics.jsonl counts it in its stage_end record,
// training_summary.json records it, and nabu test and nabu separate say it again (docs/trainer.md,
// "When validation never improves"; docs/own_data.md, "What can go wrong").
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "nabu/separator.h"
#include "test_helpers.h"
#include "training_fixture.h"

using namespace nabu;
using namespace nabu::testing;

namespace {

nlohmann::json stage_end(const fs::path& metrics) {
  std::ifstream in(metrics);
  nlohmann::json found;
  for (std::string line; std::getline(in, line);) {
    auto record = nlohmann::json::parse(line);
    if (record.value("type", "") == "stage_end") found = record;
  }
  return found;
}

}  // namespace

TEST_F(TrainingRun, AModelThatNeverBeatItsStartIsCalledUntrainedWhereverItIsUsed) {
  // A learning rate of 0: every validation equals step 0's, which stays the best.
  auto frozen = train("exp_frozen", "--max-steps=4,2 --set trainer.cfg:trainer:valid_frequency=2"
                                    " --set 'trainer.cfg:trainer:initial_learning_rate=0 0'");
  ASSERT_EQ(frozen.exit_code, 0) << frozen.output;
  EXPECT_NE(frozen.output.find("[100] stage 100: validation never improved on the model the stage "
                               "started from (a fresh initialisation) in 3 validation(s): its "
                               "model is that of step 0, and its 4 update(s) were discarded"),
            std::string::npos)
      << frozen.output;
  const std::string untrained = "the final model exp_frozen/full/model/model.pt is UNTRAINED";
  EXPECT_NE(frozen.output.find(untrained), std::string::npos) << frozen.output;
  // After "training done", where a user looks last.
  EXPECT_GT(frozen.output.rfind(untrained), frozen.output.find("training done"));
  for (const char* stage : {"100", "full"}) {
    const auto record = stage_end(dir_ / "exp_frozen" / stage / "metrics.jsonl");
    ASSERT_FALSE(record.is_null()) << stage;
    EXPECT_EQ(record["best_step"], 0) << stage;
    EXPECT_EQ(record["warnings"], 1) << stage;
    EXPECT_EQ(record["returned_its_start"], true) << stage;
  }
  auto summary = nlohmann::json::parse(read_text(dir_ / "exp_frozen/training_summary.json"));
  EXPECT_EQ(summary["final_model_untrained"], true);
  EXPECT_EQ(summary["stages"].size(), 2u);
  EXPECT_EQ(summary["warnings"].size(), 3u);  // each stage, and the final model

  auto tested = run_nabu("test --expdir=exp_frozen --threads=1"
                         " --set test_evaluator.cfg:task_2spk:batch_size=2"
                         " --set test_evaluator.cfg:task_2spk_real:batch_size=2",
                         dir_.path());
  ASSERT_EQ(tested.exit_code, 0) << tested.output;
  // Above the score tables, on standard output.
  const auto warned = tested.output.find("WARNING: " + untrained);
  ASSERT_NE(warned, std::string::npos) << tested.output;
  EXPECT_LT(warned, tested.output.find("mean over mixtures")) << tested.output;
  auto separated = run_nabu("separate --expdir=exp_frozen --out=sep --threads=1"
                            " data/corpus/2speakers/wav8k/min/tt/mix/tt_0.wav",
                            dir_.path());
  ASSERT_EQ(separated.exit_code, 0) << separated.output;
  EXPECT_NE(separated.output.find(untrained), std::string::npos) << separated.output;
  // An application gets it as data.
  const auto frozen_api = nabu::api::Separator::from_experiment((dir_ / "exp_frozen").string());
  ASSERT_EQ(frozen_api.warnings().size(), 1u);
  EXPECT_NE(frozen_api.warnings()[0].find("is UNTRAINED"), std::string::npos);

  // A training whose validation improves says none of it.
  auto learned = train("exp_learned", "--max-steps=4,2 --set trainer.cfg:trainer:valid_frequency=2"
                                      " --set 'trainer.cfg:trainer:initial_learning_rate=1e-2 1e-3'");
  ASSERT_EQ(learned.exit_code, 0) << learned.output;
  EXPECT_EQ(learned.output.find("never improved"), std::string::npos) << learned.output;
  EXPECT_EQ(learned.output.find("UNTRAINED"), std::string::npos) << learned.output;
  const auto record = stage_end(dir_ / "exp_learned/full/metrics.jsonl");
  EXPECT_GT(record["best_step"].get<int>(), 0);
  EXPECT_EQ(record["warnings"], 0);
  summary = nlohmann::json::parse(read_text(dir_ / "exp_learned/training_summary.json"));
  EXPECT_EQ(summary["final_model_untrained"], false);
  EXPECT_TRUE(
      nabu::api::Separator::from_experiment((dir_ / "exp_learned").string()).warnings().empty());
}

// Where to start a small training from (docs/own_data.md, "With little data"): init_file takes a
// training's model.pt; a shipped model is TorchScript, and says so.
TEST_F(TrainingRun, InitFileNamesATorchScriptFileAsOne) {
  const std::string shipped = (source_dir() / "models/pit_blstm_2spk_8k/model.pt").string();
  auto result = train("exp_init", "--max-steps=1 --set trainer.cfg:trainer:init_file=" + shipped);
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find(shipped + ": a TorchScript file (nabu export writes them; the "
                               "shipped models are them), not the parameters of a training"),
            std::string::npos)
      << result.output;
}
