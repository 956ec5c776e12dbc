#include <iostream>

#include "nabu/cli/commands/cli.h"
#include "nabu/core/recipe.h"

namespace nabu::cli {

int cmd_check(const std::vector<std::string>& args) {
  CommonOptions common;
  po::options_description description("Options");
  add_common_options(description, common);
  if (!parse_command_line("check", "Checks a recipe without running it.", args, description))
    return 0;
  require(common.recipe, "recipe", "check");
  apply_common_options(common);
  Recipe::load(common.recipe, common.overrides());
  std::cout << "recipe " << common.recipe << ": no problems found\n";
  return 0;
}

}  // namespace nabu::cli
