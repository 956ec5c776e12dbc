// `nabu check` on the original MERL_DC_2spk recipe (tests/fixtures): it passes as shipped, and
// every component's own checker (processors, models, reconstructors, scorers) reports a broken
// key with its file and line; `dependencies` naming no section is only a warning.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>

#include "nabu/catalog/recipe_check.h"
#include "nabu/core/error.h"
#include "nabu/core/recipe.h"
#include "nabu/neuralnetworks/models/model_bank.h"
#include "nabu/neuralnetworks/models/model_graph.h"
#include "nabu/neuralnetworks/task_definition.h"
#include "nabu/neuralnetworks/trainers/trainer_options.h"
#include "test_helpers.h"

using namespace nabu;
using namespace nabu::testing;

namespace {

bool has_line(const std::vector<std::string>& lines, const std::string& a, const std::string& b) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
    return line.find(a) != std::string::npos && line.find(b) != std::string::npos;
  });
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

}  // namespace

TEST(RecipeCheck, TheOriginalRecipePasses) {
  TempDir dir;
  auto report = check_recipe(copy_fixture(dir, {}), {});
  EXPECT_TRUE(report.problems.empty()) << joined(report.problems);
}

TEST(RecipeCheck, EveryComponentCheckerNamesFileAndLine) {
  TempDir dir;
  auto recipe = copy_fixture(
      dir, {{"feature_processor.cfg", {"[processor]\n", "[processor]\nwinlenght = 0.032\n"}},
            {"reconstructor.cfg", {"[task_2spk]\n", "[task_2spk]\nnrss = 2\n"}},
            {"scorer.cfg", {"score_type = sdr\n#link the original source",
                            "score_type = sdr sdrr\n#link the original source"}},
            {"model.cfg", {"architecture = dblstm", "architecture = dblstmm"}},
            {"database.conf", {"dependencies = trainspec", "dependencies = trainspek"}}});
  auto report = check_recipe(recipe, {});
  const auto& problems = report.problems;
  EXPECT_TRUE(has_line(problems, "feature_processor.cfg:2", "winlenght")) << joined(problems);
  EXPECT_TRUE(has_line(problems, "reconstructor.cfg:3", "nrss")) << joined(problems);
  EXPECT_TRUE(has_line(problems, "scorer.cfg:4", "sdrr")) << joined(problems);
  EXPECT_TRUE(has_line(problems, "model.cfg:6", "dblstmm")) << joined(problems);
  // The original never reads `dependencies`: a warning, not a problem.
  EXPECT_FALSE(has_line(problems, "dependencies", "trainspek")) << joined(problems);
  EXPECT_TRUE(has_line(report.warnings, "dependencies", "trainspek")) << joined(report.warnings);
  EXPECT_EQ(problems.size(), 4u) << joined(problems);
}

// A speaker_verification test task (DANet-Drude2018's task_sr*) needs its handler section; an
// unknown output_handling_type is one problem naming the key's line.
TEST(RecipeCheck, OutputHandlingProblemsAreOneLineEach) {
  TempDir dir;
  auto recipe = copy_fixture(
      dir, {{"test_evaluator.cfg",
             {"[task_2spk]\n", "[task_2spk]\noutput_handling_type = speaker_verification\n"}}});
  auto report = check_recipe(recipe, {});
  ASSERT_EQ(report.problems.size(), 2u) << joined(report.problems);
  EXPECT_TRUE(has_line(report.problems, "[task_2spk] is a speaker_verification task",
                       "no speaker_verification_handler.cfg"))
      << joined(report.problems);
  EXPECT_TRUE(has_line(report.problems, "[task_2spk] is scored by speaker_verification_scorer.cfg",
                       "which the recipe lacks"))
      << joined(report.problems);
  TempDir other;
  recipe = copy_fixture(
      other, {{"test_evaluator.cfg",
               {"[task_2spk]\n", "[task_2spk]\noutput_handling_type = speaker_verifcation\n"}}});
  report = check_recipe(recipe, {});
  ASSERT_EQ(report.problems.size(), 1u) << joined(report.problems);
  EXPECT_TRUE(has_line(report.problems, "test_evaluator.cfg:",
                       "output_handling_type = speaker_verifcation is not known"))
      << joined(report.problems);
}

// A file that does not parse is one problem naming file:line and the line, not "missing" with the
// problems its absence implies (tasks whose models are "not in model_names", ...).
TEST(RecipeCheck, AFileThatDoesNotParseIsOneProblem) {
  TempDir dir;
  auto recipe = copy_fixture(dir, {{"model.cfg", {"num_units = 600", "num_units 600"}}});
  auto report = check_recipe(recipe, {ConfigOverride::parse("model.cfg:main:num_layers=1")});
  ASSERT_EQ(report.problems.size(), 1u) << joined(report.problems);
  EXPECT_EQ(report.problems[0], (recipe / "model.cfg").string() +
                                    ":8: cannot parse 'num_units 600' (expected 'key = value' "
                                    "or '[section]')");
}

// A UTF-8 byte order mark is accepted; a repeated key or section is a warning naming both places
// (Python 2.7 reads them, and an original recipe repeats a key), never a problem.
TEST(RecipeCheck, ByteOrderMarkPassesAndRepeatsAreWarnings) {
  TempDir dir;
  auto recipe = copy_fixture(
      dir, {{"model.cfg", {"[hyper]", "\xEF\xBB\xBF[hyper]"}},
            {"trainer.cfg", {"num_epochs = 100\n", "num_epochs = 100\nnum_epochs = 3\n"}},
            {"model.cfg", {"[outlayer]", "[main]\nnum_layers = 1\n\n[outlayer]"}}});
  auto report = check_recipe(recipe, {});
  EXPECT_TRUE(report.problems.empty()) << joined(report.problems);
  const std::string trainer = (recipe / "trainer.cfg").string();
  const std::string model = (recipe / "model.cfg").string();
  EXPECT_TRUE(has_line(report.warnings,
                       trainer + ":12: [trainer] num_epochs is given again (previously at " +
                           trainer + ":11); this last value is used",
                       ""))
      << joined(report.warnings);
  EXPECT_TRUE(has_line(report.warnings, ": section [main] is given again (first at " + model + ":4)",
                       model + ":"))
      << joined(report.warnings);
}

// A misspelt required key: one line naming file, section, the key and the likely misspelling.
TEST(RecipeCheck, AMisspeltRequiredKeyIsOneLineNamingTheMisspelling) {
  TempDir dir;
  auto recipe = copy_fixture(
      dir, {{"trainer.cfg", {"segment_lengths = 100 full", "segment_lenghts = 100 full"}},
            {"model.cfg", {"architecture = dblstm", "archtecture = dblstm"}}});
  auto report = check_recipe(recipe, {});
  const std::string trainer = (recipe / "trainer.cfg").string();
  const std::string model = (recipe / "model.cfg").string();
  EXPECT_EQ(report.problems,
            (std::vector<std::string>{
                model + ":4: [main] architecture: required key is missing (is 'archtecture' at " +
                    model + ":6 a misspelling of it?)",
                trainer + ":1: [trainer] segment_lengths: required key is missing (is "
                          "'segment_lenghts' at " + trainer + ":9 a misspelling of it?)"}));
}

// A file a recipe references (a text processor's alphabet_file, docs/recognition.md) must exist.
TEST(RecipeCheck, AMissingAlphabetFileIsAProblemWithItsLine) {
  TempDir dir;
  const std::string missing = (dir / "no_such_phones.txt").string();
  auto recipe = copy_recipe(source_dir() / "recipes/ASR/toy_CTC_phones", dir,
                            {{"phone_processor.cfg", {"data/corpus/sources/phones.txt", missing}}});
  auto report = check_recipe(recipe, {});
  EXPECT_TRUE(has_line(report.problems,
                       "phone_processor.cfg:4: [processor] alphabet_file: '" + missing +
                           "' does not exist",
                       ""))
      << joined(report.problems);
}

// On a fresh checkout the generated data is missing: each missing list names the tool that makes
// it (data/README.md).
TEST(RecipeCheck, MissingGeneratedListsNameTheToolThatMakesThem) {
  TempDir fresh;  // the current folder, with no data/ under it
  auto check = [&](const std::string& recipe) {
    return run_nabu("check --recipe=" + (source_dir() / "recipes" / recipe).string(),
                    fresh.path());
  };
  auto dc = check("SS/DBLSTM/toy_DC_2spk");
  EXPECT_EQ(dc.exit_code, 1) << dc.output;
  EXPECT_NE(dc.output.find("tt/mix_wav.scp' does not exist (generate the corpus first: "
                           "tools/make_toy_corpus; ./run demo"),
            std::string::npos)
      << dc.output;
  EXPECT_NE(dc.output.find("' does not exist (generate the recorded test set first: "
                           "tools/make_recorded_eval_set; ./run demo"),
            std::string::npos)
      << dc.output;
  auto long_pit = check("SS/DBLSTM/long_PIT_SISNR_2spk");
  EXPECT_NE(long_pit.output.find("recorded_cv/2speakers/wav8k/min/cv/mix_wav.scp' does not exist "
                                 "(generate it first: tools/make_recorded_corpus, then "
                                 "tools/make_recorded_eval_set --from-corpus=data/recorded_corpus "
                                 "--split=cv; ./run demo"),
            std::string::npos)
      << long_pit.output;
  EXPECT_NE(long_pit.output.find("recorded_heldout/2speakers/wav8k/min/tt/mix_wav.scp' does not "
                                 "exist (generate it first: tools/make_recorded_corpus, then "
                                 "tools/make_recorded_eval_set --from-corpus=data/recorded_corpus; ./run demo"),
            std::string::npos)
      << long_pit.output;
  auto babble = check("SS/DBLSTM/toy_PIT_2spk_babble_linkedsets");
  EXPECT_NE(babble.output.find("(generate the corpus first: tools/make_toy_corpus, then "
                               "tools/make_noisy_corpus; ./run demo"),
            std::string::npos)
      << babble.output;
  auto asr = check("ASR/toy_CTC_phones");
  EXPECT_NE(asr.output.find("sources/tr_wav.scp' does not exist (generate the corpus first: "
                            "tools/make_toy_corpus; ./run demo"),
            std::string::npos)
      << asr.output;
  auto librimix = check("SS/LibriMix/Libri2Mix_ConvTasNet");
  EXPECT_NE(librimix.output.find("train-360/mix_clean_wav.scp' does not exist (write the "
                                 "corpus's lists first: nabu prepare librimix <corpus root>"),
            std::string::npos)
      << librimix.output;
  auto wham = check("SS/WHAM/WHAM_ConvTasNet_noisy");
  EXPECT_NE(wham.output.find("(write the corpus's lists first: nabu prepare wham"),
            std::string::npos)
      << wham.output;
  // Run from a folder that does not hold the recipe, the lists may be missing for that alone:
  // one warning says where relative paths were read from.
  const std::string elsewhere = "the recipe's relative paths are read from the working directory " +
                                fs::canonical(fresh.path()).string() + ", which does not hold ";
  EXPECT_NE(dc.output.find(elsewhere), std::string::npos) << dc.output;
  // From a folder that holds the recipe (a project root without its data), no such warning.
  copy_recipe(source_dir() / "recipes/SS/DBLSTM/toy_DC_2spk", fresh, {});
  auto here = run_nabu("check --recipe=recipe", fresh.path());
  EXPECT_EQ(here.exit_code, 1) << here.output;
  EXPECT_NE(here.output.find("(generate the corpus first: tools/make_toy_corpus; ./run demo"),
            std::string::npos)
      << here.output;
  EXPECT_EQ(here.output.find("read from the working directory"), std::string::npos)
      << here.output;
}

// A trainer.cfg stage reads its inputs and targets from stores cut at its segment length: a
// length database.conf does not store is a problem per section, found before `nabu data`.
TEST(RecipeCheck, AStageSegmentLengthTheDatabaseDoesNotStoreIsAProblemPerSection) {
  TempDir dir;
  auto recipe = copy_fixture(
      dir, {{"trainer.cfg", {"segment_lengths = 100 full", "segment_lengths = 200 full"}}});
  auto report = check_recipe(recipe, {});
  const auto& problems = report.problems;
  // The training task's inputs and targets, and (validation_segments = stage, the original's
  // way) the validation task's.
  for (const std::string section : {"[trainspec]", "[traintargets]", "[trainusedbins]",
                                    "[devspec]", "[devtargets]", "[devusedbins]"})
    EXPECT_TRUE(has_line(problems, section + " segment_lengths", "'100 full' has no 200"))
        << section << "\n" << joined(problems);
  EXPECT_TRUE(has_line(problems, "database.conf:30: [trainspec]", "'features' of task task_2spk"))
      << joined(problems);
  EXPECT_TRUE(
      has_line(problems, "[devspec]", "'features' of validation task task_2spk"))
      << joined(problems);
  EXPECT_EQ(problems.size(), 6u) << joined(problems);
}

// `nabu check` runs the builder's own graph rules (ModelGraph::check) instead of a copy of them:
// for each graph below, building the task as TaskGradients does (read_task_spec, then ModelGraph)
// and `nabu check` give the same verdict, and the builder's message is check's, word for word.
TEST(RecipeCheck, TheGraphVerdictIsTheBuilders) {
  struct Case {
    std::string name, outputs, graph;
  };
  const std::string good = "n0_model = main\nn0_inputs = features\n"
                           "bin_emb_model = outlayer\nbin_emb_inputs = n0\n";
  const std::vector<Case> cases = {
      {"as shipped", "bin_emb", "nodes = n0 bin_emb\n" + good},
      // The builder accepts a task input among the outputs (an older check did not).
      {"an output that is also a task input", "bin_emb features", "nodes = n0 bin_emb\n" + good},
      // Outputs and inputs name a node's output name, not the node (an older check used nodes).
      {"a renamed output", "emb", "nodes = n0 bin_emb\nbin_emb_output_names = emb\n" + good},
      {"the node name of a renamed output", "bin_emb",
       "nodes = n0 bin_emb\nbin_emb_output_names = emb\n" + good},
      {"an input naming a renamed node", "bin_emb",
       "nodes = n0 bin_emb\nn0_output_names = hidden\n" + good},
      {"a renamed node used by its output name", "bin_emb",
       "nodes = n0 bin_emb\nn0_output_names = hidden\nn0_model = main\n"
       "n0_inputs = features\nbin_emb_model = outlayer\nbin_emb_inputs = hidden\n"},
      {"a later node", "bin_emb", "nodes = bin_emb n0\n" + good},
      {"an unknown input", "bin_emb",
       "nodes = n0 bin_emb\nn0_model = main\nn0_inputs = featurs\n"
       "bin_emb_model = outlayer\nbin_emb_inputs = n0\n"},
      {"an unknown model", "bin_emb",
       "nodes = n0 bin_emb\nn0_model = mian\nn0_inputs = features\n"
       "bin_emb_model = outlayer\nbin_emb_inputs = n0\n"},
      {"a missing model key", "bin_emb",
       "nodes = n0 bin_emb\nn0_inputs = features\nbin_emb_model = outlayer\n"
       "bin_emb_inputs = n0\n"},
      {"a missing inputs key", "bin_emb",
       "nodes = n0 bin_emb\nn0_model = main\nbin_emb_model = outlayer\n"
       "bin_emb_inputs = n0\n"},
      {"a node listed twice", "bin_emb", "nodes = n0 n0 bin_emb\n" + good},
      {"an output named like a task input", "bin_emb",
       "nodes = n0 bin_emb\nn0_output_names = features\n" + good},
      {"two output names", "bin_emb", "nodes = n0 bin_emb\nn0_output_names = a b\n" + good},
      {"an output that is neither", "emb", "nodes = n0 bin_emb\n" + good},
  };
  int rejected = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    auto recipe_dir = copy_fixture(
        dir, {{"trainer.cfg", {"outputs = bin_emb\n", "outputs = " + c.outputs + "\n"}},
              {"trainer.cfg",
               {"n0_model = main\nn0_inputs = features\n#\nbin_emb_model = outlayer\n"
                "bin_emb_inputs = n0\n",
                ""}},
              {"trainer.cfg", {"nodes = n0 bin_emb\n", c.graph}}});
    auto recipe = Recipe::load(recipe_dir);
    const ConfigSection& task = recipe.get("trainer.cfg").section("task_2spk");
    std::string built;  // the builder's error, empty when it builds
    try {
      ModelBank bank(recipe.get("model.cfg"));
      read_task_spec(task, TaskRole::kTrain);
      ModelGraph graph(task, bank);
    } catch (const Error& e) {
      built = e.what();
    }
    auto report = check_recipe(recipe_dir, {});
    EXPECT_EQ(built.empty(), report.problems.empty()) << built << "\n" << joined(report.problems);
    EXPECT_EQ(report.problems, ModelGraph::check(task, recipe.get("model.cfg")));
    if (built.empty()) continue;
    ++rejected;
    EXPECT_NE(std::find(report.problems.begin(), report.problems.end(), built),
              report.problems.end())
        << built << "\n" << joined(report.problems);
  }
  EXPECT_EQ(rejected, 11);
}

// The original's older single-model format (Nabu-MSSS until November 2017, e.g. its
// MERL_DC_2and3spk of then): model.cfg holds [io] and one [model] whose dblstm ends in its own
// output layer (output_dims), and the task sections name no graph. Training refuses it with the
// conversion named; `nabu recipe upgrade` makes the current recipe of it.
TEST(RecipeUpgrade, TheOlderSingleModelFormatBecomesTheCurrentOneAndPassesCheck) {
  TempDir dir;
  auto current = copy_fixture(dir, {});
  const fs::path old = dir / "old_recipe";
  fs::copy(current, old, fs::copy_options::recursive);
  write_text(old / "model.cfg",
             "[io]\ninputs = features\noutputs = bin_emb\n\n[model]\narchitecture = dblstm\n"
             "num_units = 600\nnum_layers = 2\noutput_dims = 2580\ninput_noise = 0.2\n"
             "dropout = 1.0\nrecurrent_dropout = 1.0\nlayer_norm = False\n");
  const std::vector<std::string> graph_keys = {"inputs =",   "outputs =",   "nodes =",
                                               "n0_model",   "n0_inputs",   "bin_emb_model",
                                               "bin_emb_inputs"};
  for (const char* name : {"trainer.cfg", "validation_evaluator.cfg", "test_evaluator.cfg"}) {
    std::istringstream in(read_text(old / name));
    std::string line, kept;
    while (std::getline(in, line)) {
      bool graph = false;
      for (const auto& key : graph_keys) graph = graph || line.rfind(key, 0) == 0;
      if (!graph) kept += line + "\n";
    }
    write_text(old / name, kept);
  }
  auto text = read_text(old / "trainer.cfg");
  text.replace(text.find("[trainer]\n"), 10,
               "[trainer]\nmulti_trainer = single_1to1\nresume_training = True\n");
  write_text(old / "trainer.cfg", text);

  // Training and checking name the conversion.
  auto refused = check_recipe(old, {});
  EXPECT_TRUE(has_line(refused.problems, "model.cfg",
                       "the older single-model format ([io] and [model], no [hyper]); convert "
                       "the recipe with: nabu recipe upgrade " + old.string()))
      << joined(refused.problems);

  auto upgraded = run_nabu("recipe upgrade " + old.string() + " " + (dir / "new").string());
  ASSERT_EQ(upgraded.exit_code, 0) << upgraded.output;
  EXPECT_NE(upgraded.output.find("nabu check finds no problem in it"), std::string::npos)
      << upgraded.output;
  EXPECT_TRUE(fs::exists(dir / "new/UPGRADE.md"));
  EXPECT_TRUE(check_recipe(dir / "new", {}).problems.empty());

  // What it wrote is the current fixture's model and graph, key for key.
  auto model = ConfigFile::load(dir / "new/model.cfg");
  auto expected_model = ConfigFile::load(current / "model.cfg");
  EXPECT_EQ(model.section("hyper").get_string("model_names"), "main outlayer");
  for (const char* section : {"main", "outlayer"})
    for (const auto& key : model.section(section).keys())
      EXPECT_EQ(model.section(section).get_string(key),
                expected_model.section(section).get_string(key, "(none)"))
          << section << " " << key;
  EXPECT_EQ(model.section("outlayer").get_string("output_dims"), "2580");
  EXPECT_FALSE(model.section("main").has("output_dims"));
  for (const char* name : {"trainer.cfg", "validation_evaluator.cfg", "test_evaluator.cfg"}) {
    auto written = ConfigFile::load(dir / "new" / name);
    auto expected = ConfigFile::load(current / name);
    for (const auto& section : expected.section_names()) {
      if (!expected.section(section).has("nodes")) continue;
      for (const auto& key : {"inputs", "outputs", "nodes", "n0_model", "n0_inputs",
                              "bin_emb_model", "bin_emb_inputs"})
        EXPECT_EQ(written.section(section).get_string(key, "(none)"),
                  expected.section(section).get_string(key))
            << name << " [" << section << "] " << key;
    }
  }
  auto trainer = ConfigFile::load(dir / "new/trainer.cfg").section("trainer");
  EXPECT_FALSE(trainer.has("multi_trainer"));
  EXPECT_FALSE(trainer.has("resume_training"));
  // It trains as the older trainer did (seed 001: the mean of the task losses, each minibatch's
  // gradient clipped before the sum), and says so.
  const auto options = read_trainer_options(ConfigFile::load(dir / "new/trainer.cfg"));
  EXPECT_EQ(options.task_loss_combination, "mean");
  EXPECT_TRUE(options.optimizer.clip_grad_value_per_minibatch);
  const std::string notes = read_text(dir / "new/UPGRADE.md");
  EXPECT_NE(notes.find("task_loss_combination = mean added (the older trainer averaged the task "
                       "losses"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("clip_grad_value_per_minibatch = True added"), std::string::npos) << notes;
  EXPECT_NE(upgraded.output.find("clip_grad_value_per_minibatch = True added"), std::string::npos)
      << upgraded.output;

  // A second run into the same folder, or a recipe already current, is one line.
  auto again = run_nabu("recipe upgrade " + old.string() + " " + (dir / "new").string());
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
  auto current_again = run_nabu("recipe upgrade " + current.string() + " " +
                                (dir / "newer").string());
  EXPECT_EQ(current_again.exit_code, 1);
  EXPECT_NE(current_again.output.find("in the current format already"), std::string::npos)
      << current_again.output;
  EXPECT_FALSE(fs::exists(dir / "newer"));

  // A key the old trainer.cfg sets itself is kept as it is.
  text = read_text(old / "trainer.cfg");
  text.replace(text.find("[trainer]\n"), 10, "[trainer]\ntask_loss_combination = sum\n");
  write_text(old / "trainer.cfg", text);
  ASSERT_EQ(run_nabu("recipe upgrade " + old.string() + " " + (dir / "kept").string()).exit_code,
            0);
  const auto kept = read_trainer_options(ConfigFile::load(dir / "kept/trainer.cfg"));
  EXPECT_EQ(kept.task_loss_combination, "sum");
  EXPECT_TRUE(kept.optimizer.clip_grad_value_per_minibatch);
}
