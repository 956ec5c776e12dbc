// `nabu check`: loads every file of a recipe and reports ALL problems at once, each with
// file:line, without running anything. The checks reuse the components' own option declarations
// and registries, so a recipe that passes check is read the same way by data/train/test.
#include <iostream>
#include <set>

#include <spdlog/spdlog.h>

#include "nabu/cli/commands/cli.h"
#include "nabu/catalog/recipe_check.h"
#include "nabu/core/error.h"

namespace nabu::cli {

int cmd_check(const std::vector<std::string>& args) {
  CommonOptions common;
  bool quiet = false;
  po::options_description description("Options");
  add_common_options(description, common,
                     "");
  description.add_options()("quiet,q", switch_value(&quiet), "print only problems");
  po::positional_options_description positional = recipe_positional();
  if (!parse_command_line("check",
                          "Checks a recipe without running it: syntax, required files and keys,\n"
                          "value types, unknown keys (with suggestions), references between files\n"
                          "(task inputs -> database sections, nodes -> models, loss_type ->\n"
                          "loss.cfg, processor configs, reconstructor/scorer sections) and\n"
                          "registered names. Exit 0 when clean, 1 when there are problems.",
                          args, description, &positional))
    return 0;
  require(common.recipe, "recipe", "check");
  apply_common_options(common);
  auto report = check_recipe(common.recipe, common.overrides());
  for (const auto& warning : report.warnings) std::cout << "warning: " << warning << "\n";
  for (const auto& problem : report.problems) std::cout << "problem: " << problem << "\n";
  if (report.problems.empty()) {
    if (!quiet) std::cout << "recipe " << common.recipe << ": OK (" << report.files_checked
                          << " files checked, " << report.warnings.size() << " warnings)\n";
    return 0;
  }
  std::cout << "recipe " << common.recipe << ": " << report.problems.size() << " problem"
            << (report.problems.size() == 1 ? "" : "s") << "\n";
  return 1;
}

}  // namespace nabu::cli
