// `nabu models`: the shipped trained models (postprocessing/shipped_models.h), each with its
// card's summary and folder.
#include <iostream>

#include "nabu/cli/commands/cli.h"
#include "nabu/core/strings.h"
#include "nabu/postprocessing/shipped_models.h"

namespace nabu::cli {

int cmd_models(const std::vector<std::string>& args) {
  po::options_description description("Options");
  if (!parse_command_line("models",
                          "Lists the trained models shipped with Nabu: separate with one, no "
                          "training needed,\nwith nabu separate --model=<name> --out=DIR "
                          "recording.wav. Each folder holds\nthe model (a file nabu export "
                          "wrote), its card (card.md: data, compute, figures,\nlimits), its "
                          "recipe, training log and metrics. Looked for in $NABU_MODELS_PATH\n"
                          "(colon-separated folders), share/nabu/models beside the lib/ folder "
                          "of libnabu.so\n(an installed tree moved elsewhere), the install "
                          "prefix's share/nabu/models and the\nsource tree's models/.",
                          args, description))
    return 0;
  const auto models = shipped_models();
  if (models.empty()) {
    std::vector<std::string> folders;
    for (const auto& folder : shipped_model_folders()) folders.push_back(folder.string());
    std::cout << "no shipped model found in " << join(folders, ", ") << "\n";
    return 1;
  }
  for (const auto& model : models)
    std::cout << model.name << "  -  " << model.summary << "\n    " << model.folder.string()
              << "/card.md\n";
  return 0;
}

}  // namespace nabu::cli
