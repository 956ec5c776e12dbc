#include "nabu/inference/shipped_models.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu_paths.h"  // generated: NABU_SOURCE_MODELS_DIR, NABU_INSTALLED_MODELS_DIR

namespace nabu {

namespace {

// The first paragraph after the card's title, joined into one line.
std::string card_summary(const std::filesystem::path& card) {
  std::ifstream in(card);
  std::string line, summary;
  bool titled = false;
  while (std::getline(in, line)) {
    const std::string text = trim(line);
    if (!titled) {
      titled = text.rfind("# ", 0) == 0;
      continue;
    }
    if (text.empty()) {
      if (!summary.empty()) break;
      continue;
    }
    summary += (summary.empty() ? "" : " ") + text;
  }
  return summary.empty() ? "(no summary: " + card.string() + " has no paragraph after its title)"
                         : summary;
}

// share/nabu/models beside the lib/ folder this library was loaded from: an installed tree
// moved or copied elsewhere (a relocated prefix, a package unpacked anywhere) still finds its
// models. Empty when there is none there or the library's path cannot be known.
std::filesystem::path models_beside_library() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&models_beside_library), &info) == 0 ||
      info.dli_fname == nullptr)
    return {};
  std::error_code error;
  auto prefix = std::filesystem::weakly_canonical(info.dli_fname, error).parent_path();
  if (error) return {};
  // lib/ or a multiarch lib/<triplet>/ (GNUInstallDirs under /usr).
  for (int up = 0; up < 2 && prefix.has_parent_path(); ++up) {
    prefix = prefix.parent_path();
    const auto models = prefix / "share" / "nabu" / "models";
    if (std::filesystem::is_directory(models, error)) return models;
  }
  return {};
}

}  // namespace

std::vector<std::filesystem::path> shipped_model_folders() {
  std::vector<std::filesystem::path> folders;
  if (const char* path = std::getenv("NABU_MODELS_PATH"))
    for (const auto& folder : split(path, ':'))
      if (!folder.empty()) folders.emplace_back(folder);
  const auto beside = models_beside_library();
  if (!beside.empty() && beside != std::filesystem::path(NABU_INSTALLED_MODELS_DIR))
    folders.push_back(beside);
  folders.emplace_back(NABU_INSTALLED_MODELS_DIR);
  folders.emplace_back(NABU_SOURCE_MODELS_DIR);
  return folders;
}

std::vector<ShippedModel> shipped_models() {
  std::map<std::string, ShippedModel> found;
  for (const auto& folder : shipped_model_folders()) {
    std::error_code error;
    if (!std::filesystem::is_directory(folder, error)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
      const auto file = entry.path() / "model.pt";
      const std::string name = entry.path().filename().string();
      if (found.count(name) || !std::filesystem::is_regular_file(file, error)) continue;
      ShippedModel model;
      model.name = name;
      model.folder = entry.path();
      model.file = file;
      model.summary = card_summary(entry.path() / "card.md");
      read_model_notes(entry.path(), model);
      found[name] = std::move(model);
    }
  }
  std::vector<ShippedModel> models;
  for (auto& [name, model] : found) models.push_back(std::move(model));
  return models;
}

void read_model_notes(const std::filesystem::path& folder, ShippedModel& model) {
  const auto path = folder / "model.json";
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return;
  std::ifstream in(path);
  const auto notes = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) {
    return Error(path.string() + ": " + why);
  };
  if (!notes.is_object()) throw bad("not a JSON object");
  if (notes.contains("default_from_rate")) {
    if (!notes["default_from_rate"].is_number_integer() || notes["default_from_rate"].get<int>() < 0)
      throw bad("default_from_rate must be a sample rate in Hz (an integer >= 0)");
    model.default_from_rate = notes["default_from_rate"].get<int>();
  }
  if (notes.contains("weak_pitch_semitones")) {
    if (!notes["weak_pitch_semitones"].is_number() || notes["weak_pitch_semitones"].get<double>() < 0)
      throw bad("weak_pitch_semitones must be a number >= 0");
    model.weak_pitch.semitones = notes["weak_pitch_semitones"].get<double>();
  }
  if (notes.contains("weak_pitch_explained")) {
    if (!notes["weak_pitch_explained"].is_string())
      throw bad("weak_pitch_explained must be a string (where the card explains the range)");
    model.weak_pitch.explained = (folder / notes["weak_pitch_explained"].get<std::string>()).string();
  }
}

WeakPitchRange weak_pitch_range_of(const std::filesystem::path& model_file) {
  ShippedModel notes;
  read_model_notes(model_file.parent_path().empty() ? "." : model_file.parent_path(), notes);
  return notes.weak_pitch;
}

ShippedModel default_shipped_model(int rate) {
  const ShippedModel* chosen = nullptr;
  std::vector<std::string> defaults;
  const auto models = shipped_models();
  for (const auto& model : models) {
    if (model.default_from_rate < 0) continue;
    defaults.push_back(model.name + " (from " + std::to_string(model.default_from_rate) + " Hz)");
    if (model.default_from_rate <= rate &&
        (!chosen || model.default_from_rate > chosen->default_from_rate))
      chosen = &model;
  }
  if (!chosen)
    throw Error("no shipped model separates recordings at " + std::to_string(rate) +
                " Hz by default (" +
                (defaults.empty() ? std::string("no shipped model is a default")
                                  : "defaults: " + join(defaults, ", ")) +
                "); name one with --model=<name> (nabu models) or an experiment with --expdir");
  return *chosen;
}

ShippedModel find_shipped_model(const std::string& name, const std::string& flag) {
  const auto models = shipped_models();
  std::vector<std::string> names;
  for (const auto& model : models) {
    if (model.name == name) return model;
    names.push_back(model.name);
  }
  std::vector<std::string> searched;
  for (const auto& folder : shipped_model_folders()) searched.push_back(folder.string());
  throw Error(flag + "=" + name + ": no shipped model of that name" + did_you_mean(name, names) +
              (names.empty() ? "; none found in " + join(searched, ", ")
                             : "; shipped: " + join(names, ", ")) +
              " (an experiment takes --expdir; nabu models lists the shipped ones)");
}

bool names_exported_file(const std::string& name) {
  const auto extension = std::filesystem::path(name).extension();
  return name.find('/') != std::string::npos || extension == ".pt" || extension == ".onnx";
}

std::filesystem::path exported_model_file(const std::string& name, const std::string& flag) {
  return names_exported_file(name) ? std::filesystem::path(name)
                                   : find_shipped_model(name, flag).file;
}

std::string shipped_model_recipe(const ShippedModel& model) {
  std::ifstream in(model.folder / "recipe" / "experiment.json");
  if (!in) return "";
  const auto record = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object() || !record.contains("recipe") || !record["recipe"].is_string())
    return "";
  const std::string recipe = record["recipe"].get<std::string>();
  const auto at = recipe.rfind("/recipes/");
  return at == std::string::npos ? recipe : recipe.substr(at + 1);
}

}  // namespace nabu
