// `nabu test`'s results folders (evaluation/evaluation_run.h): a --max-utterances subset is written
// apart from the full results and its summary says over how many utterances; a folder holds one
// run's results only; a missing model leaves no folder.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nabu/evaluation/evaluation_run.h"
#include "nabu/experiment/trained_experiment.h"
#include "test_helpers.h"
#include "training_fixture.h"

using namespace nabu;
using namespace nabu::testing;

namespace {

nlohmann::json sdr_summary(const fs::path& testdir) {
  return nlohmann::json::parse(read_text(testdir / "results_task_2spk_sdr_summary.json"));
}

std::vector<std::string> test_folders(const fs::path& expdir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(expdir))
    if (entry.is_directory() && entry.path().filename().string().rfind("test", 0) == 0)
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST(TestFolderName, EachOptionSetHasItsOwnFolder) {
  TestRunOptions options;
  EXPECT_EQ(test_folder_name(options), "test");
  options.max_utterances = 2;
  EXPECT_EQ(test_folder_name(options), "test_first2");
  options.model = "avg";
  options.chunk_seconds = 0.5;
  EXPECT_EQ(test_folder_name(options), "test_avg_chunks_0.5s_first2");
  options.model = "step1200";
  EXPECT_EQ(test_folder_name(options), "test_step1200_chunks_0.5s_first2");
  EXPECT_TRUE(is_step_model("step1200"));
  for (const char* name : {"step", "step12a", "Step5", "final", "avg", "astep5"})
    EXPECT_FALSE(is_step_model(name)) << name;
  int64_t from = 0, to = 0;
  EXPECT_TRUE(parse_averaged_steps("avg10500-12500", from, to));
  EXPECT_EQ(from, 10500);
  EXPECT_EQ(to, 12500);
  for (const char* name : {"avg", "avg-", "avg5", "avg5-", "avg-5", "avg5-6x", "av5-6", "step5"})
    EXPECT_FALSE(parse_averaged_steps(name, from, to)) << name;
  options.model = "avg10-20";
  options.chunk_seconds = 0;
  options.max_utterances = -1;
  EXPECT_EQ(test_folder_name(options), "test_avg10-20");
}

TEST_F(TrainingRun, TestSubsetsAreWrittenApartAndFoldersHoldOneRun) {
  auto trained = train("exp", "--max-steps=1 --set trainer.cfg:trainer:valid_frequency=1000"
                              " --set test_evaluator.cfg:task_2spk:batch_size=2");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const fs::path expdir = dir_ / "exp";

  // A missing averaged model: one line, and no folder made.
  auto avg = run_nabu("test --expdir=exp --threads=1 --task=task_2spk --model=avg", dir_.path());
  EXPECT_EQ(avg.exit_code, 1) << avg.output;
  EXPECT_NE(avg.output.find("model_avg.pt does not exist"), std::string::npos) << avg.output;
  EXPECT_EQ(test_folders(expdir), std::vector<std::string>{});

  auto full = run_nabu("test --expdir=exp --threads=1 --task=task_2spk", dir_.path());
  ASSERT_EQ(full.exit_code, 0) << full.output;
  EXPECT_EQ(sdr_summary(expdir / "test")["SDR"]["SS"]["all"]["utterances"], 4);
  const std::string full_scores = read_text(expdir / "test/results_task_2spk_sdr_summary.json");
  // The pointers name the wavs where they end up, not where they were written.
  const std::string pointers = read_text(expdir / "test/reconstructions/task_2spk/pointers.scp");
  EXPECT_NE(pointers.find("exp/test/reconstructions/task_2spk/s1/tt_0.wav"), std::string::npos)
      << pointers;
  EXPECT_EQ(pointers.find(".tmp."), std::string::npos) << pointers;
  // Every utterance in the CSV, worst first, with its files; the worst on the console.
  const auto csv = read_text(expdir / "test/results_task_2spk_sdr_utterances.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5) << csv;  // header and 4 utterances
  EXPECT_NE(csv.find("exp/test/reconstructions/task_2spk/s2/"), std::string::npos) << csv;
  EXPECT_NE(full.output.find("the 4 lowest SDR improvements"), std::string::npos) << full.output;

  auto subset = run_nabu("test --expdir=exp --threads=1 --task=task_2spk --max-utterances=2",
                         dir_.path());
  ASSERT_EQ(subset.exit_code, 0) << subset.output;
  EXPECT_EQ(sdr_summary(expdir / "test_first2")["SDR"]["SS"]["all"]["utterances"], 2);
  EXPECT_EQ(read_text(expdir / "test/results_task_2spk_sdr_summary.json"), full_scores);
  EXPECT_TRUE(fs::exists(expdir / "test/reconstructions/task_2spk/s1/tt_3.wav"));
  EXPECT_FALSE(fs::exists(expdir / "test_first2/reconstructions/task_2spk/s1/tt_3.wav"));

  // A rerun replaces the folder: nothing of an earlier run stays (here a wav planted as if an
  // earlier run had written it), and no temporary folder is left beside it.
  write_text(expdir / "test/reconstructions/task_2spk/s1/stale.wav", "stale");
  auto again = run_nabu("test --expdir=exp --threads=1 --task=task_2spk", dir_.path());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_FALSE(fs::exists(expdir / "test/reconstructions/task_2spk/s1/stale.wav"));
  EXPECT_TRUE(fs::exists(expdir / "test/reconstructions/task_2spk/s1/tt_3.wav"));
  EXPECT_EQ(test_folders(expdir), (std::vector<std::string>{"test", "test_first2"}));
}
