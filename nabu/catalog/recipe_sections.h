// Which database.conf sections a recipe's tasks use: the sections named by the tasks of
// trainer.cfg, validation_evaluator.cfg and test_evaluator.cfg, and by reconstructor.cfg and
// scorer.cfg for the test tasks. `nabu data` prepares these (and the sections that compute their
// statistics) and skips the rest, so a recipe copied from a family of recipes does not need
// stores that only its siblings make (docs/data_layout.md).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nabu/core/recipe.h"

namespace nabu {

// Section name -> where it is named ("trainer.cfg [task_2spk] features", ...). Throws
// ConfigError for a task file that cannot be read (naming file, section and key).
std::map<std::string, std::vector<std::string>> sections_used_by_tasks(const Recipe& recipe);

}  // namespace nabu
