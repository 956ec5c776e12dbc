// Stores bound to what made them (docs/data_layout.md, "Stores bound to what made them"): a second
// recipe that shares a store_dir cannot change an experiment's data, and an experiment refuses a
// store that was made again from other data since it read it.
#include <gtest/gtest.h>

#include <fstream>

#include "test_helpers.h"
#include "training_fixture.h"

namespace nabu::testing {
namespace {

const std::string kTestLists = "data/corpus/2speakers/wav8k/min/tt/";

// The first `count` lines of `from` in `to`.
void write_first_lines(const fs::path& from, const fs::path& to, int count) {
  std::ifstream in(from);
  std::string line, text;
  for (int i = 0; i < count && std::getline(in, line); ++i) text += line + "\n";
  write_text(to, text);
}

// A copy of the recipe folder `from` in `to` whose every mention of `text` reads `replacement`.
void copy_recipe_replacing(const fs::path& from, const fs::path& to, const std::string& text,
                           const std::string& replacement) {
  fs::create_directories(to);
  for (const auto& entry : fs::directory_iterator(from)) {
    if (!entry.is_regular_file()) continue;
    std::string content = read_text(entry.path());
    for (auto at = content.find(text); at != std::string::npos;
         at = content.find(text, at + replacement.size()))
      content.replace(at, text.size(), replacement);
    write_text(to / entry.path().filename(), content);
  }
}

int error_lines(const std::string& output) {
  int count = 0;
  for (auto at = output.find("error:"); at != std::string::npos; at = output.find("error:", at + 1))
    ++count;
  return count;
}

// The DC recipe trained (2 + 1 updates) and tested in <dir>/exp/a on the tone corpus.
void train_and_test(const TempDir& dir) {
  ASSERT_EQ(run_nabu("data --recipe=" + dc_recipe() + " --expdir=exp/a --threads=1", dir.path())
                .exit_code, 0);
  auto trained = run_nabu("train " + tiny_dc("--expdir=exp/a --max-steps=2,1"), dir.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  auto tested = run_nabu("test --expdir=exp/a --threads=1", dir.path());
  ASSERT_EQ(tested.exit_code, 0) << tested.output;
}

TEST(FaultsStoreBinding, ASecondRecipeSharingTheStoreDirNeitherOverwritesNorSilentlyChangesAnExperiment) {
  TempDir dir;
  make_tone_corpus(dir.path(), 8, 4);
  // The second recipe: the same store_dir, test lists of 2 of the 4 mixtures.
  for (const char* list : {"mix_wav.scp", "allS_wav.scp", "utt_spkinfo.txt"})
    write_first_lines(dir / (kTestLists + list),
                      dir / (kTestLists + "short_" + list), 2);
  copy_recipe_replacing(dc_recipe(), dir / "recipe_b", kTestLists, kTestLists + "short_");
  train_and_test(dir);
  const std::string before = read_text(dir / "exp/a/test/test_losses.json");
  ASSERT_TRUE(fs::exists(dir / "exp/a/stores.json"));

  // nabu data of the second recipe refuses, in one line naming the store and the other recipe.
  auto refused = run_nabu("data --recipe=recipe_b --expdir=exp/b --threads=1", dir.path());
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_EQ(error_lines(refused.output), 1) << refused.output;
  EXPECT_NE(refused.output.find("data/stores/toy2spk/"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("by recipe " + fs::path(dc_recipe()).lexically_normal().string()),
            std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("store_dir"), std::string::npos) << refused.output;
  // ... and the first experiment's test gives what it gave.
  ASSERT_EQ(run_nabu("test --expdir=exp/a --threads=1", dir.path()).exit_code, 0);
  EXPECT_EQ(read_text(dir / "exp/a/test/test_losses.json"), before);

  // The user removes the test stores and makes them with the second recipe's shorter lists:
  // the first experiment's test refuses them, in one line, and names the way back.
  for (const char* kind : {"features", "targets", "usedbins"})
    fs::remove_all(dir / ("data/stores/toy2spk/" + std::string(kind) + "/tt"));
  auto made = run_nabu("data --recipe=recipe_b --expdir=exp/b --threads=1", dir.path());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  auto changed = run_nabu("test --expdir=exp/a --threads=1", dir.path());
  EXPECT_NE(changed.exit_code, 0);
  EXPECT_EQ(error_lines(changed.output), 1) << changed.output;
  EXPECT_NE(changed.output.find("is not the one experiment exp/a read: 2 utterances (was 4)"),
            std::string::npos)
      << changed.output;
  EXPECT_NE(changed.output.find("nabu data --recipe=exp/a --expdir=exp/a"), std::string::npos)
      << changed.output;
  EXPECT_EQ(read_text(dir / "exp/a/test/test_losses.json"), before);
}

TEST(FaultsStoreBinding, AResumeRefusesTrainingStoresMadeAgainFromAChangedList) {
  TempDir dir;
  make_tone_corpus(dir.path(), 8, 4);
  train_and_test(dir);
  // The training list loses lines after training; nabu data of the same recipe makes the
  // stores again (a corpus of that recipe changed), which the experiment then refuses.
  const std::string train_lists = "data/corpus/2speakers/wav8k/min/tr/";
  for (const char* list : {"mix_wav.scp", "allS_wav.scp", "utt_spkinfo.txt"}) {
    write_first_lines(dir / (train_lists + list), dir / "short.txt", 5);
    fs::rename(dir / "short.txt", dir / (train_lists + list));
  }
  auto made = run_nabu("data --recipe=" + dc_recipe() + " --expdir=exp/a --threads=1", dir.path());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  EXPECT_NE(made.output.find("it is made again"), std::string::npos) << made.output;
  auto resumed = run_nabu("train --expdir=exp/a --resume --threads=1", dir.path());
  EXPECT_NE(resumed.exit_code, 0);
  EXPECT_EQ(error_lines(resumed.output), 1) << resumed.output;
  EXPECT_NE(resumed.output.find("is not the one experiment exp/a read: 5 utterances (was 8)"),
            std::string::npos)
      << resumed.output;
}

}  // namespace
}  // namespace nabu::testing
