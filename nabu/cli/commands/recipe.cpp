// `nabu recipe new OUT --from=RECIPE --data=PREPARED`: a recipe for a prepared corpus
// (catalog/recipe_from_corpus.h, docs/own_data.md).
#include <iostream>

#include "nabu/catalog/recipe_from_corpus.h"
#include "nabu/cli/commands/cli.h"
#include "nabu/core/error.h"

namespace nabu::cli {

int cmd_recipe(const std::vector<std::string>& args) {
  std::string action;
  RecipeFromCorpusOptions options;
  std::string out, from, data;
  po::options_description description("Options");
  description.add_options()
      ("action", po::value(&action), "new (also positional)")
      ("out", po::value(&out), "the recipe folder to write (also positional); must not exist")
      ("from", po::value(&from),
       "the recipe to start from, e.g. recipes/SS/DBLSTM/toy_PIT_SISNR_2spk")
      ("data", po::value(&data), "the prepared corpus: the folder nabu prepare wrote, e.g. "
                                 "data/my_mixtures");
  po::positional_options_description positional;
  positional.add("action", 1).add("out", 1);
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
          "Example: nabu recipe new recipes/mine --from=recipes/SS/DBLSTM/toy_PIT_SISNR_2spk "
          "--data=data/my_mixtures",
          args, description, &positional))
    return 0;
  require(action, "action", "recipe");
  if (action != "new") throw Error("unknown action '" + action + "': nabu recipe new OUT ...");
  require(out, "out", "recipe");
  require(from, "from", "recipe");
  require(data, "data", "recipe");
  options.out = out;
  options.from = from;
  options.prepared = data;
  auto result = make_recipe_from_corpus(options);
  std::cout << "recipe " << out << " written for " << result.sample_rate << " Hz data:\n";
  for (const auto& change : result.changes) std::cout << "  " << change << "\n";
  std::cout << "next: nabu data --recipe=" << out << " --expdir=exp/" << options.out.filename().string()
            << ", then train and test (docs/own_data.md)\n";
  return 0;
}

}  // namespace nabu::cli
