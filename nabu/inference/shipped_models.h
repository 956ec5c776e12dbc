// The trained models shipped with Nabu (models/<name>/ in the source tree, share/nabu/models/
// once installed): each folder holds model.pt (a file nabu export wrote), card.md (its model
// card, whose first paragraph after the title is its one-line summary), the recipe it was
// trained with, its training log and metrics. `nabu separate --model=<name>`, `nabu models`.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "nabu/inference/separation_cautions.h"

namespace nabu {

struct ShippedModel {
  std::string name;
  std::filesystem::path folder, file;  // file: <folder>/model.pt
  std::string summary;
  // From <folder>/model.json (when there is one): the recordings it separates by default (at
  // this rate and above, up to the next default's; -1: never a default), and where its card
  // says it separates poorly.
  int default_from_rate = -1;
  WeakPitchRange weak_pitch;
};

// Where shipped models are looked for, in order: the folders of $NABU_MODELS_PATH
// (colon-separated), share/nabu/models beside the lib/ folder libnabu was loaded from (an
// installed tree moved elsewhere), the install prefix's share/nabu/models and the source tree's
// models/.
std::vector<std::filesystem::path> shipped_model_folders();
// Every model of those folders (the first folder that has a name wins), sorted by name.
std::vector<ShippedModel> shipped_models();
// What a model file's folder says of it (model.json: "default_from_rate", "weak_pitch_semitones",
// "weak_pitch_explained", relative to the folder), into `model`; the default weak range where
// there is no model.json. Throws Error naming the file for one that is not such JSON.
void read_model_notes(const std::filesystem::path& folder, ShippedModel& model);
// The weak pitch range of an exported file: its folder's model.json, or the default.
WeakPitchRange weak_pitch_range_of(const std::filesystem::path& model_file);
// The shipped model that separates a recording at `rate` by default: of those with a
// default_from_rate, the one with the highest at or below `rate`. Throws Error when none is.
ShippedModel default_shipped_model(int rate);

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
