#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "nabu/core/config.h"

namespace nabu {

struct CheckReport {
  std::vector<std::string> problems;
  std::vector<std::string> warnings;
  int files_checked = 0;
};

// Everything `nabu check` verifies; never throws for problems in the recipe.
CheckReport check_recipe(const std::filesystem::path& recipe_dir,
                         const std::vector<ConfigOverride>& overrides);

}  // namespace nabu
