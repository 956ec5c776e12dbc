// `nabu recipe upgrade OLD NEW`: a recipe in the original's older single-model format (Nabu-MSSS
// until November 2017: model.cfg holds [io] inputs/outputs and one [model], the task sections
// name no graph) rewritten in the multi-model format Nabu reads ([hyper] model_names, one section
// per model, task sections with inputs, outputs and nodes).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace nabu {

struct RecipeUpgradeResult {
  std::vector<std::string> changes;   // one line per change, also in the new recipe's README.md
  std::vector<std::string> problems;  // what nabu check still finds in the new recipe
};

// Writes NEW (which must not exist) whole or not at all: OLD's files, with model.cfg and the task
// sections of trainer.cfg, validation_evaluator.cfg and test_evaluator.cfg converted. Throws
// Error when OLD is not in the older format or cannot be converted (names what and why).
RecipeUpgradeResult upgrade_recipe(const std::filesystem::path& old_recipe,
                                   const std::filesystem::path& new_recipe);

}  // namespace nabu
