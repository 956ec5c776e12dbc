// Which database.conf sections `nabu data` prepares, and in which order (docs/data_layout.md,
// "Which sections nabu data prepares"): by default the ones the recipe's tasks use and the
// sections computing their statistics; explicit --section names; or all (--all-sections).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "nabu/core/recipe.h"

namespace nabu {

struct SectionChoice {
  std::vector<std::string> sections;  // only these (and nothing else)
  // Without `sections`: true prepares only `used_sections` and the sections that compute their
  // statistics (listing every other one as skipped); false prepares every section.
  bool only_used_sections = false;
  // Section -> where the recipe names it (catalog/recipe_sections.h).
  std::map<std::string, std::vector<std::string>> used_sections;
};

// Sections with preprocess = True in the order they must be prepared. Throws ConfigError for a
// dependency cycle; a dependency that names no section orders nothing (the original never reads
// `dependencies`; nabu check warns).
std::vector<std::string> preparation_order(const ConfigFile& database);

// The sections `choice.used_sections` need prepared: those, and transitively the sections that
// compute their statistics or number their labels. `log`: one info line per section with why.
// nabu check asks it too (which missing lists matter), without the lines.
std::set<std::string> sections_for_tasks(const Recipe& recipe, const SectionChoice& choice,
                                         bool log = true);

// The sections to prepare, in order, per `choice`; logs every skipped one once. Throws
// ConfigError for an unknown --section, and for a chosen section whose statistics are neither
// made in this run nor on disk (naming the folder and the section that would make them).
std::vector<std::string> plan_sections(const Recipe& recipe, const SectionChoice& choice);

// Two store folders are the same (after normalising "." and trailing slashes).
bool same_directory(const std::string& a, const std::string& b);

}  // namespace nabu
