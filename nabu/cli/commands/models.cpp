// `nabu models`: the shipped trained models (inference/shipped_models.h), each with its
// card's summary and folder.
#include <algorithm>
#include <iostream>

#include "nabu/cli/commands/cli.h"
#include "nabu/core/strings.h"
#include "nabu/inference/shipped_models.h"

namespace nabu::cli {

int cmd_models(const std::vector<std::string>& args) {
  po::options_description description("Options");
  if (!parse_command_line("list models",
                          "Lists the trained models shipped with Nabu: separate with one, no "
                          "training needed,\nwith nabu separate --model=<name> --out=DIR "
                          "recording.wav (without --model: the default\nfor the recording's "
                          "sample rate, named below). Each folder holds\nthe model (a file nabu export "
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
  // Each default's rates: from its own up to the next default's.
  std::vector<int> starts;
  for (const auto& model : models)
    if (model.default_from_rate >= 0) starts.push_back(model.default_from_rate);
  std::sort(starts.begin(), starts.end());
  for (const auto& model : models) {
    std::cout << model.name << "  -  " << model.summary << "\n    " << model.folder.string()
              << "/card.md\n";
    if (model.default_from_rate < 0) continue;
    const auto next = std::upper_bound(starts.begin(), starts.end(), model.default_from_rate);
    const std::string from = std::to_string(model.default_from_rate);
    std::string rates;
    if (next == starts.end())
      rates = model.default_from_rate > 0 ? "at " + from + " Hz and above" : "at any rate";
    else
      rates = model.default_from_rate > 0
                  ? "at " + from + " to " + std::to_string(*next - 1) + " Hz"
                  : "below " + std::to_string(*next) + " Hz";
    std::cout << "    the default of nabu separate without --model for recordings " << rates << "\n";
  }
  return 0;
}

}  // namespace nabu::cli
