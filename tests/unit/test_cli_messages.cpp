// What the nabu binary prints for a user's mistakes in a recipe or a flag: one line that blames
// what is wrong (the flag, or file:line [section] key), and warnings where the original's parser
// accepts a file that is probably not what was meant. Run from the source tree, where the fixture
// recipe's data lists resolve.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "test_helpers.h"

using namespace nabu::testing;

namespace {

std::string last_line(const std::string& output) {
  std::string text = output;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
}

}  // namespace

// --task names no test task: the flag is blamed and the tasks listed, by test, separate and
// recognize alike (not "test_evaluator.cfg: no section [bogus]").
TEST(CliMessages, AnUnknownTaskBlamesTheFlagAndListsTheTasks) {
  TempDir dir;
  auto recipe = copy_fixture(dir, {});
  fs::create_directories(dir / "exp");
  write_text(dir / "exp/trainer.cfg", read_text(recipe / "trainer.cfg"));
  write_pcm16_wav(dir / "mix.wav", std::vector<short>(800, 0));
  const std::string tasks = "; tasks of " + (recipe / "test_evaluator.cfg").string() +
                            ": task_2spk, task_2spk_tr, task_2spk_dev, task_3spk";
  const std::string common = " --expdir=" + (dir / "exp").string() + " --recipe=" + recipe.string();
  auto test = run_nabu("test" + common + " --task=bogus");
  EXPECT_EQ(test.exit_code, 1) << test.output;
  EXPECT_EQ(last_line(test.output), "nabu test: error: --task=bogus: no such task" + tasks);
  auto typo = run_nabu("test" + common + " --task=task_2spx");
  EXPECT_EQ(last_line(typo.output), "nabu test: error: --task=task_2spx: no such task (did you "
                                    "mean 'task_2spk'?)" + tasks);
  const std::string recording = " " + (dir / "mix.wav").string();
  auto separate = run_nabu("separate" + common + " --task=bogus --out=" + (dir / "out").string() +
                           recording);
  EXPECT_EQ(separate.exit_code, 1) << separate.output;
  EXPECT_EQ(last_line(separate.output), "nabu separate: error: --task=bogus: no such task" + tasks);
  auto recognize = run_nabu("recognize" + common + " --task=bogus" + recording);
  EXPECT_EQ(recognize.exit_code, 1) << recognize.output;
  EXPECT_EQ(last_line(recognize.output),
            "nabu recognize: error: --task=bogus: no such task" + tasks);
}

// A misspelt required key stops train with one line naming file, section, key and the likely
// misspelling; a repeated key is read as Python 2.7 reads it and warned about by train and check.
TEST(CliMessages, TrainAndCheckNameMisspeltKeysAndWarnAboutRepeatedOnes) {
  TempDir dir;
  auto recipe = copy_fixture(
      dir, {{"trainer.cfg", {"num_epochs = 100\n", "num_epochs = 100\nnum_epochs = 3\n"}}});
  const std::string trainer = (recipe / "trainer.cfg").string();
  const std::string repeated = trainer + ":12: [trainer] num_epochs is given again (previously at " +
                               trainer + ":11); this last value is used";
  auto check = run_nabu("check --recipe=" + recipe.string());
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("warning: " + repeated + "\n"), std::string::npos) << check.output;

  write_text(recipe / "trainer.cfg", [&] {
    std::string text = read_text(recipe / "trainer.cfg");
    return text.replace(text.find("segment_lengths ="), 15, "segment_lenghts");
  }());
  auto train = run_nabu("train --recipe=" + recipe.string() + " --expdir=" +
                        (dir / "exp").string());
  EXPECT_EQ(train.exit_code, 1) << train.output;
  EXPECT_NE(train.output.find(repeated), std::string::npos) << train.output;
  EXPECT_EQ(last_line(train.output),
            "nabu train: error: " + trainer + ":1: [trainer] segment_lengths: required key is "
            "missing (is 'segment_lenghts' at " + trainer + ":9 a misspelling of it?)");
}
