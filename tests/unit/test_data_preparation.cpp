// `nabu data`: section order, completeness/resume, and errors naming section and utterance.
#include <gtest/gtest.h>
#include <sndfile.h>

#include <cmath>
#include <random>

#include "nabu/core/error.h"
#include "nabu/core/recipe.h"
#include "nabu/processing/data_preparation.h"
#include "nabu/processing/processor.h"
#include "nabu/processing/store.h"
#include "test_helpers.h"
#include "training_fixture.h"

using namespace nabu;
using nabu::testing::error_of;
using nabu::testing::run_nabu;
using nabu::testing::TempDir;
using nabu::testing::write_noise_wav;
using nabu::testing::write_text;

namespace {

// A small corpus and recipe in `root` (paths relative to root, which is the working directory).
void make_mini_recipe(const std::filesystem::path& root, int utterances = 6) {
  std::string mix, sources;
  for (int i = 0; i < utterances; ++i) {
    std::string name = "utt" + std::to_string(i);
    int length = 3000 + 700 * i;
    write_noise_wav(root / "wav" / (name + "_mix.wav"), length, 3 * i);
    write_noise_wav(root / "wav" / (name + "_s1.wav"), length, 3 * i + 1);
    write_noise_wav(root / "wav" / (name + "_s2.wav"), length, 3 * i + 2);
    mix += name + " wav/" + name + "_mix.wav\n";
    sources += name + " wav/" + name + "_s1.wav wav/" + name + "_s2.wav\n";
  }
  write_text(root / "lists/mix.scp", mix);
  write_text(root / "lists/sources.scp", sources);
  auto recipe = root / "recipe";
  write_text(recipe / "feature_processor.cfg",
             "[processor]\nprocessor = audio_feat_processor\nfeature = logspec\nmvn_type = global\n");
  write_text(recipe / "target_processor.cfg",
             "[processor]\nprocessor = onehotperfeature_target_processor\nnrs = 2\n"
             "feature = magspec\n");
  // Deliberately listed before the section that computes its statistics.
  write_text(recipe / "database.conf",
             "[globalvars]\nsegment_lengths = 20 full\nmeanandvar_dir = stores/trainspec\n"
             "[devspec]\ndatafiles = lists/mix.scp\npreprocess = True\n"
             "writer_style = numpy_float_array_as_tfrecord\nstore_dir = stores/devspec\n"
             "meanandvar_dir = globalvars\nprocessor_config = feature_processor.cfg\n"
             "segment_lengths = full\ndependencies = None\n"
             "[trainspec]\ndatafiles = lists/mix.scp\npreprocess = True\n"
             "writer_style = numpy_float_array_as_tfrecord\nstore_dir = stores/trainspec\n"
             "meanandvar_dir = globalvars\nprocessor_config = feature_processor.cfg\n"
             "segment_lengths = globalvars\n"
             "[traintargets]\ndatafiles = lists/sources.scp\npreprocess = True\n"
             "writer_style = numpy_bool_array_as_tfrecord\nstore_dir = stores/traintargets\n"
             "processor_config = target_processor.cfg\nsegment_lengths = globalvars\n"
             "[testorgmix]\ndatafiles = lists/mix.scp\npreprocess = False\n"
             "processor_config = feature_processor.cfg\n");
}

}  // namespace

TEST(DataPreparationOrder, StatisticsProducerFirstWhateverTheFileOrder) {
  auto database = ConfigFile::parse(
      "[globalvars]\nmeanandvar_dir = s/train\n"
      "[test]\ndatafiles = x\npreprocess = True\nstore_dir = s/test\nmeanandvar_dir = globalvars\n"
      "processor_config = p\ndependencies = targets\n"
      "[train]\ndatafiles = x\npreprocess = True\nstore_dir = s/train/\nmeanandvar_dir = globalvars\n"
      "processor_config = p\n"
      "[targets]\ndatafiles = x\npreprocess = True\nstore_dir = s/t\nprocessor_config = p\n"
      "[skipped]\ndatafiles = x\npreprocess = False\n",
      "database.conf");
  EXPECT_EQ(preparation_order(database), (std::vector<std::string>{"train", "targets", "test"}));
}

TEST(DataPreparationOrder, CyclesAreErrorsAndMissingDependenciesOrderNothing) {
  auto cycle = ConfigFile::parse(
      "[a]\ndatafiles = x\npreprocess = True\nstore_dir = a\nprocessor_config = p\ndependencies = b\n"
      "[b]\ndatafiles = x\npreprocess = True\nstore_dir = b\nprocessor_config = p\ndependencies = a\n",
      "database.conf");
  EXPECT_NE(error_of([&] { preparation_order(cycle); }).find("dependency cycle between sections a, b"),
            std::string::npos);
  auto missing = ConfigFile::parse(
      "[a]\ndatafiles = x\npreprocess = True\nstore_dir = a\nprocessor_config = p\n"
      "dependencies = trainspek\n[trainspec]\ndatafiles = x\n",
      "database.conf");
  // `dependencies` is documentation in the original: a name that is no section is no error.
  EXPECT_EQ(preparation_order(missing), std::vector<std::string>{"a"});
}

TEST(DataPreparationRun, PreparesResumesAndSkipsCompleteSections) {
  TempDir dir;
  make_mini_recipe(dir.path());
  auto first = run_nabu("data --recipe=recipe --expdir=exp --threads=2", dir.path());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("order: trainspec, devspec, traintargets"), std::string::npos)
      << first.output;
  StoreReader features(store_path(dir / "stores/trainspec", "20"));
  StoreReader full(store_path(dir / "stores/trainspec", "full"));
  EXPECT_EQ(full.size(), 6);
  EXPECT_EQ(features.name(0), "utt0_part0");
  // Every 20-frame segment of every utterance: floor(T/20) each.
  int64_t expected_segments = 0;
  for (int64_t i = 0; i < full.size(); ++i) expected_segments += std::max<int64_t>(1, full.length(i) / 20);
  EXPECT_EQ(features.size(), expected_segments);
  // Global MVN over the training section: normalised features have mean ~0 per dimension.
  torch::Tensor all;
  for (int64_t i = 0; i < full.size(); ++i)
    all = all.defined() ? torch::cat({all, full.read(i)}) : full.read(i);
  EXPECT_LT(all.mean(0).abs().max().item<float>(), 1e-3);
  EXPECT_TRUE(std::filesystem::exists(dir / "exp/data/trainspec/processor.cfg"));

  // A second run does nothing.
  auto second = run_nabu("data --recipe=recipe --expdir=exp", dir.path());
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("0 section(s) prepared, 3 already complete"), std::string::npos)
      << second.output;

  // A lost store (as after a kill) is rebuilt identically; the others are kept.
  auto before = StoreReader(store_path(dir / "stores/traintargets", "20")).read(3);
  std::filesystem::remove(store_path(dir / "stores/traintargets", "20"));
  auto third = run_nabu("data --recipe=recipe --expdir=exp", dir.path());
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_NE(third.output.find("1 section(s) prepared, 2 already complete"), std::string::npos);
  EXPECT_TRUE(torch::equal(before, StoreReader(store_path(dir / "stores/traintargets", "20")).read(3)));

  // Changed list lines (a regenerated corpus) make the stores of the sections reading them stale:
  // they are made again, from the new lines.
  auto lines = nabu::testing::read_text(dir / "lists/sources.scp");
  write_text(dir / "lists/sources.scp", lines.substr(0, lines.find("\nutt5 ") + 1));
  auto regenerated = run_nabu("data --recipe=recipe --expdir=exp", dir.path());
  ASSERT_EQ(regenerated.exit_code, 0) << regenerated.output;
  EXPECT_NE(regenerated.output.find("was made from other list lines"), std::string::npos)
      << regenerated.output;
  EXPECT_NE(regenerated.output.find("1 section(s) prepared, 2 already complete"), std::string::npos)
      << regenerated.output;
  EXPECT_EQ(StoreReader(store_path(dir / "stores/traintargets", "full")).size(), 5);

  // The same list lines naming rewritten audio (a corpus regenerated under the same names, e.g.
  // with augmentation) are stale too: the stores are made again from the new audio.
  auto old_targets = StoreReader(store_path(dir / "stores/traintargets", "full")).read(0);
  write_noise_wav(dir / "wav/utt0_s1.wav", 3000, 99);
  write_noise_wav(dir / "wav/utt0_s2.wav", 3000, 98);
  auto rewritten = run_nabu("data --recipe=recipe --expdir=exp", dir.path());
  ASSERT_EQ(rewritten.exit_code, 0) << rewritten.output;
  EXPECT_NE(rewritten.output.find("other list lines or other files"), std::string::npos)
      << rewritten.output;
  EXPECT_NE(rewritten.output.find("1 section(s) prepared, 2 already complete"), std::string::npos)
      << rewritten.output;
  EXPECT_FALSE(torch::equal(old_targets,
                            StoreReader(store_path(dir / "stores/traintargets", "full")).read(0)));

  // A changed processor config must not silently reuse the old stores.
  auto changed = run_nabu(
      "data --recipe=recipe --expdir=exp --set target_processor.cfg:processor:nfft=512", dir.path());
  EXPECT_EQ(changed.exit_code, 1);
  EXPECT_NE(changed.output.find("another processor config"), std::string::npos) << changed.output;
  // Nor overwrite them when the list lines changed too: the config mismatch comes first.
  write_text(dir / "lists/sources.scp", lines.substr(0, lines.find("\nutt4 ") + 1));
  auto both = run_nabu(
      "data --recipe=recipe --expdir=exp --set target_processor.cfg:processor:nfft=512", dir.path());
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.output.find("another processor config"), std::string::npos) << both.output;
  EXPECT_EQ(StoreReader(store_path(dir / "stores/traintargets", "full")).size(), 5);
}

TEST(DataPreparationRun, ErrorsNameSectionAndUtterance) {
  TempDir dir;
  make_mini_recipe(dir.path(), 3);
  write_text(dir / "wav/utt1_s2.wav", "garbage");
  auto result = run_nabu("data --recipe=recipe --expdir=exp", dir.path());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("[traintargets] utterance 'utt1' (lists/sources.scp:2)"),
            std::string::npos)
      << result.output;
  EXPECT_FALSE(std::filesystem::exists(store_path(dir / "stores/traintargets", "20")));
  // Nothing half-written is left next to the stores.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir / "stores"))
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << entry.path();

  write_text(dir / "recipe/database.conf",
             "[trainspec]\ndatafiles = lists/mix.scp\npreprocess = True\n"
             "writer_style = numpy_float_array_as_tfrecord\nstore_dir = stores/x\n"
             "processor_config = /nowhere/missing_processor.cfg\n");
  result = run_nabu("data --recipe=recipe --expdir=exp", dir.path());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("[trainspec] processor_config"), std::string::npos) << result.output;
  // Found before any work starts: the error is the only output.
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
}

// The original's recipes share store_dirs under other section names (MERL_PIT_2spk's
// [traintargets] is the DANet recipes' [trainmultitargets]): the same config and list lines are
// reused; other lines under another section's store are an error, never an overwrite.
TEST(DataPreparationRun, AnotherSectionsStoreOfTheSameDataIsReused) {
  TempDir dir;
  make_mini_recipe(dir.path(), 3);
  auto section = [](const std::string& name, const std::string& list) {
    return "[" + name + "]\ndatafiles = " + list + "\npreprocess = True\n"
           "writer_style = numpy_bool_array_as_tfrecord\nstore_dir = stores/shared\n"
           "processor_config = target_processor.cfg\nsegment_lengths = full\n";
  };
  write_text(dir / "recipe/database.conf", section("first", "lists/sources.scp"));
  auto made = run_nabu("data --recipe=recipe --expdir=exp --all-sections", dir.path());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  auto before = StoreReader(store_path(dir / "stores/shared", "full")).read(1);
  write_text(dir / "recipe/database.conf", section("second", "lists/sources.scp"));
  auto reused = run_nabu("data --recipe=recipe --expdir=exp --all-sections", dir.path());
  ASSERT_EQ(reused.exit_code, 0) << reused.output;
  EXPECT_NE(reused.output.find("was made by section [first]"), std::string::npos) << reused.output;
  EXPECT_NE(reused.output.find("0 section(s) prepared, 1 already complete"), std::string::npos)
      << reused.output;
  auto lines = nabu::testing::read_text(dir / "lists/sources.scp");
  write_text(dir / "lists/fewer.scp", lines.substr(0, lines.find("\nutt2 ") + 1));
  write_text(dir / "recipe/database.conf", section("third", "lists/fewer.scp"));
  auto other = run_nabu("data --recipe=recipe --expdir=exp --all-sections", dir.path());
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.output.find("was made for section [first] from other list lines"),
            std::string::npos)
      << other.output;
  EXPECT_TRUE(torch::equal(before, StoreReader(store_path(dir / "stores/shared", "full")).read(1)));
}

// strlabel2index_processor: speakers numbered in list order (whatever the number of workers),
// the development section continuing the training numbering through label2index_dir (and
// prepared after it although listed first), one [S] row per feature segment.
TEST(DataPreparationRun, SpeakerLabelsAreNumberedInListOrderAndContinued) {
  TempDir dir;
  make_mini_recipe(dir.path(), 4);
  write_text(dir / "lists/train_spk.txt",
             "utt0 wav/utt0_mix.wav bob M ann F\nutt1 wav/utt1_mix.wav cid M bob M\n"
             "utt2 wav/utt2_mix.wav ann F cid M\n");
  write_text(dir / "lists/dev_spk.txt",
             "utt3 wav/utt3_mix.wav cid M dan M\nutt1 wav/utt1_mix.wav ann F bob M\n");
  write_text(dir / "recipe/spk_processor.cfg",
             "[processor]\nprocessor = strlabel2index_processor\nnrs = 2\nfeature = logspec\n"
             "winlen = 0.032\nwinstep = 0.008\nnfft = 256\n");
  write_text(dir / "recipe/database.conf",
             "[devspkids]\ndatafiles = lists/dev_spk.txt\npreprocess = True\n"
             "writer_style = index_list_as_tfrecord\nstore_dir = stores/spk_dev\n"
             "label2index_dir = stores/spk_train\nprocessor_config = spk_processor.cfg\n"
             "segment_lengths = 20 full\n"
             "[trainspkids]\ndatafiles = lists/train_spk.txt\npreprocess = True\n"
             "writer_style = index_list_as_tfrecord\nstore_dir = stores/spk_train\n"
             "processor_config = spk_processor.cfg\nsegment_lengths = 20 full\n"
             "[trainspec]\ndatafiles = lists/mix.scp\npreprocess = True\n"
             "writer_style = numpy_float_array_as_tfrecord\nstore_dir = stores/trainspec\n"
             "meanandvar_dir = stores/trainspec\nprocessor_config = feature_processor.cfg\n"
             "segment_lengths = 20\n");
  auto result = run_nabu("data --recipe=recipe --expdir=exp --all-sections --threads=2", dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("order: trainspkids, devspkids, trainspec"), std::string::npos)
      << result.output;
  EXPECT_EQ(read_label_index(dir / "stores/spk_train"),
            (std::vector<std::string>{"bob", "ann", "cid"}));
  EXPECT_EQ(read_label_index(dir / "stores/spk_dev"),
            (std::vector<std::string>{"bob", "ann", "cid", "dan"}));
  StoreReader train_full(store_path(dir / "stores/spk_train", "full"));
  ASSERT_EQ(train_full.size(), 3);
  EXPECT_TRUE(torch::equal(train_full.read(1), torch::tensor({2, 0}, torch::kInt32)));
  StoreReader dev_full(store_path(dir / "stores/spk_dev", "full"));
  EXPECT_TRUE(torch::equal(dev_full.read(0), torch::tensor({2, 3}, torch::kInt32)));
  EXPECT_TRUE(torch::equal(dev_full.read(1), torch::tensor({1, 0}, torch::kInt32)));
  // As many 20-frame segments as the features of the same wav have.
  StoreReader spec(store_path(dir / "stores/trainspec", "20"));
  StoreReader labels(store_path(dir / "stores/spk_train", "20"));
  int64_t spec_utt0_to_2 = 0;
  for (int64_t i = 0; i < spec.size(); ++i)
    if (spec.name(i).rfind("utt3_", 0) != 0) ++spec_utt0_to_2;
  EXPECT_EQ(labels.size(), spec_utt0_to_2);
  EXPECT_EQ(labels.name(0), "utt0_part0");
  EXPECT_EQ(labels.name(labels.size() - 1).rfind("utt2_part", 0), 0u);

  // A line with another number of speakers than nrs names the utterance; a missing numbering
  // names the key and the folder.
  write_text(dir / "lists/dev_spk.txt", "utt3 wav/utt3_mix.wav cid M\n");
  std::filesystem::remove_all(dir / "stores/spk_dev");
  result = run_nabu("data --recipe=recipe --expdir=exp --section=devspkids", dir.path());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("[devspkids] utterance 'utt3' (lists/dev_spk.txt:1): has 1 speaker "
                               "label(s)"),
            std::string::npos)
      << result.output;
  std::filesystem::remove_all(dir / "stores/spk_train");
  result = run_nabu("data --recipe=recipe --expdir=exp --section=devspkids", dir.path());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("label2index_dir"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("stores/spk_train/label2index.json does not exist"),
            std::string::npos)
      << result.output;
}

// The original MERL_DC_2spk recipe with only its data and store paths rewritten: nabu data
// prepares what its tasks use and skips [testspec3spk], whose statistics only the 3-speaker
// recipe makes; --all-sections (the original's behaviour) stops there, naming the folder.
TEST(DataPreparationRun, OriginalRecipePreparesWhatItsTasksUse) {
  namespace fs = std::filesystem;
  using nabu::testing::read_text;
  TempDir dir;
  nabu::testing::make_tone_corpus(dir.path(), 4, 2);
  const fs::path fixture = nabu::testing::source_dir() / "tests" / "fixtures" / "MERL_DC_2spk";
  fs::create_directories(dir / "recipe");
  for (const auto& entry : fs::directory_iterator(fixture)) {
    if (!entry.is_regular_file()) continue;
    std::string text = read_text(entry.path());
    if (entry.path().filename() == "database.conf") {
      for (auto [from, to] : {std::pair<std::string, std::string>{"tests/fixtures/MERL_DC_2spk/lists/",
                                                                  "data/corpus/"},
                              {"build/fixture_stores/", "stores/"}})
        for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at))
          text.replace(at, from.size(), to);
    }
    write_text(dir / "recipe" / entry.path().filename().string(), text);
  }
  auto prepared = run_nabu("data --recipe=recipe --expdir=exp --threads=2", dir.path());
  ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
  EXPECT_NE(prepared.output.find("[testspec3spk]: skipped: no task of this recipe uses it"),
            std::string::npos)
      << prepared.output;
  EXPECT_NE(prepared.output.find("[trainspec]: used by trainer.cfg [task_2spk] features"),
            std::string::npos)
      << prepared.output;
  EXPECT_TRUE(fs::exists(store_path(dir / "stores/MERL_segmented/features/test", "full")));
  EXPECT_FALSE(fs::exists(dir / "stores/MERL_3spk_segmented"));

  auto all = run_nabu("data --recipe=recipe --expdir=exp --threads=2 --all-sections", dir.path());
  EXPECT_EQ(all.exit_code, 1) << all.output;
  EXPECT_NE(all.output.find("[testspec3spk] normalises with the statistics in "
                            "stores/MERL_3spk_segmented/features/train, which do not exist; no "
                            "section of this recipe makes them"),
            std::string::npos)
      << all.output;
  EXPECT_NE(all.output.find("database.conf:"), std::string::npos) << all.output;
}
