// The trained models shipped with Nabu (models/<name>/ in the source tree, share/nabu/models/
// once installed): each folder holds model.pt (a file nabu export wrote), card.md (its model
// card, whose first paragraph after the title is its one-line summary), the recipe it was
// trained with, its training log and metrics. `nabu separate --model=<name>`, `nabu models`.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace nabu {

struct ShippedModel {
  std::string name;
  std::filesystem::path folder, file;  // file: <folder>/model.pt
  std::string summary;
};

// Where shipped models are looked for, in order: the folders of $NABU_MODELS_PATH
// (colon-separated), share/nabu/models beside the lib/ folder libnabu was loaded from (an
// installed tree moved elsewhere), the install prefix's share/nabu/models and the source tree's
// models/.
std::vector<std::filesystem::path> shipped_model_folders();
// Every model of those folders (the first folder that has a name wins), sorted by name.
std::vector<ShippedModel> shipped_models();
// A shipped model by name, or an Error naming the flag, the name, a close name and the models
// there are.
ShippedModel find_shipped_model(const std::string& name, const std::string& flag);
// Whether `--model=<name>` names a file (it has a '/' or ends in .pt or .onnx) rather than a
// shipped model.
bool names_exported_file(const std::string& name);
// The file `--model=<name>` names: a path as given, else the shipped model of that name
// (find_shipped_model's errors).
std::filesystem::path exported_model_file(const std::string& name, const std::string& flag);
// The recipe a shipped model was trained with, as its recipe copy records it relative to the
// source tree ("recipes/SS/..."); empty when the copy names none.
std::string shipped_model_recipe(const ShippedModel& model);

}  // namespace nabu
