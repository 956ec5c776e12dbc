// `nabu recipe new OUT --from=RECIPE --data=PREPARED`: a recipe for a prepared corpus
// (catalog/recipe_from_corpus.h, docs/own_data.md). `nabu recipe upgrade OLD NEW`: a recipe of
// the original's older single-model format in the current one (catalog/recipe_upgrade.h).
#include <iostream>

#include "nabu/catalog/recipe_from_corpus.h"
#include "nabu/catalog/recipe_upgrade.h"
#include "nabu/cli/commands/cli.h"
#include "nabu/core/error.h"
#include "nabu/core/strings.h"

namespace nabu::cli {

namespace {

int upgrade(const std::vector<std::string>& paths) {
  if (paths.size() != 2)
    throw Error("nabu recipe upgrade takes two folders, OLD and NEW (got " +
                std::to_string(paths.size()) + ")");
  auto result = upgrade_recipe(paths[0], paths[1]);
  std::cout << "recipe " << paths[1] << " written from " << paths[0] << ":\n";
  for (const auto& change : result.changes) std::cout << "  " << change << "\n";
  if (result.problems.empty()) {
    std::cout << "nabu check finds no problem in it\n";
    return 0;
  }
  std::cout << "nabu check still finds " << result.problems.size()
            << " problem(s) in it (nabu check " << paths[1] << " lists them), the first: "
            << result.problems.front() << "\n";
  return 0;
}

}  // namespace

int cmd_recipe(const std::vector<std::string>& args) {
  std::string action;
  std::vector<std::string> paths;
  std::string from, data;
  po::options_description description("Options");
  description.add_options()
      ("action", po::value(&action), "new or upgrade (also positional)")
      ("out", po::value(&paths)->multitoken(),
       "new: the recipe folder to write (must not exist); upgrade: OLD and NEW (positional)")
      ("from", po::value(&from),
       "new: the recipe to start from, e.g. recipes/SS/DBLSTM/toy_PIT_SISNR_2spk")
      ("data", po::value(&data), "new: the prepared corpus: the folder nabu prepare wrote, e.g. "
                                 "data/my_mixtures");
  po::positional_options_description positional;
  positional.add("action", 1).add("out", -1);
  if (!parse_command_line(
          "recipe",
          "nabu recipe new OUT --from=RECIPE --data=PREPARED writes a recipe for a prepared\n"
          "corpus: RECIPE's training, validation and test lists become PREPARED's lists of the\n"
          "same splits, its stores go to data/stores/<OUT's name>/, nfft fits a frame at the\n"
          "corpus's sample rate, segment lengths in samples keep their duration, dynamic mixing\n"
          "draws from the corpus's training sources, and test tasks on other corpora are left\n"
          "out. The recipe passes nabu check before it is written (whole, or not at all); its\n"
          "README.md lists what differs from RECIPE. Run data, train and test on it from the\n"
          "project root (docs/own_data.md).\n\n"
          "nabu recipe upgrade OLD NEW writes OLD, a recipe in the original's older\n"
          "single-model format (model.cfg with [io] and [model], Nabu-MSSS until November\n"
          "2017), as NEW in the current one: [hyper] model_names, [main] (and [outlayer] where\n"
          "the old model ended in its own output layer), and the task graph (inputs, outputs,\n"
          "nodes) in every task section; trainer.cfg gets the older trainer's mean of the task\n"
          "losses and per-minibatch clipping (task_loss_combination = mean,\n"
          "clip_grad_value_per_minibatch = True) unless it sets them. NEW/UPGRADE.md lists the\n"
          "changes, and what nabu check still finds is printed.\n\n"
          "Examples:\n"
          "  nabu recipe new recipes/mine --from=recipes/SS/DBLSTM/toy_PIT_SISNR_2spk "
          "--data=data/my_mixtures\n"
          "  nabu recipe upgrade old_recipes/MERL_DC_2spk recipes/MERL_DC_2spk",
          args, description, &positional))
    return 0;
  require(action, "action", "recipe");
  if (action == "upgrade") return upgrade(paths);
  if (action != "new")
    throw Error("unknown action '" + action + "': nabu recipe new OUT ... or nabu recipe upgrade "
                "OLD NEW");
  if (paths.size() > 1) throw Error("nabu recipe new writes one folder (got " +
                                    std::to_string(paths.size()) + ": " + join(paths, " ") + ")");
  if (paths.empty()) require(std::string(), "out", "recipe");
  require(from, "from", "recipe");
  require(data, "data", "recipe");
  RecipeFromCorpusOptions options;
  options.out = paths.front();
  options.from = from;
  options.prepared = data;
  auto result = make_recipe_from_corpus(options);
  std::cout << "recipe " << paths.front() << " written for " << result.sample_rate << " Hz data:\n";
  for (const auto& change : result.changes) std::cout << "  " << change << "\n";
  std::cout << "next: nabu data --recipe=" << paths.front()
            << " --expdir=exp/" << options.out.filename().string()
            << ", then train and test (docs/own_data.md)\n";
  return 0;
}

}  // namespace nabu::cli
