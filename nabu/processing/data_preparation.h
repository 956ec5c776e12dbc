// `nabu data`: every database.conf section with preprocess = True becomes one HDF5 store per
// segment length. `nabu data` prepares the sections the recipe's tasks use (and those computing
// their statistics); --all-sections or --section choose otherwise. Sections run in dependency
// order (explicit `dependencies` plus the section that computes the meanandvar_dir statistics),
// whatever their order in the file; a section counts as done only when all its stores are
// complete.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nabu/core/recipe.h"

namespace nabu {

// Sections with preprocess = True in the order they must be prepared. Throws ConfigError for a
// dependency cycle; a dependency that names no section orders nothing (the original never reads
// `dependencies`; nabu check warns).
std::vector<std::string> preparation_order(const ConfigFile& database);

struct SectionSummary {
  std::string section;
  bool skipped = false;  // already complete
  int64_t utterances = 0, examples = 0, frames = 0, bytes = 0;
  double audio_seconds = 0, wall_seconds = 0;
};

struct DataPreparationOptions {
  int workers = 0;               // utterances processed in parallel; 0 = all cores
  std::vector<std::string> sections;  // only these (and nothing else)
  // Without `sections`: true prepares only `used_sections` and the sections that compute their
  // statistics (listing every other one as skipped); false prepares every section.
  bool only_used_sections = false;
  // Section -> where the recipe names it (catalog/recipe_sections.h).
  std::map<std::string, std::vector<std::string>> used_sections;
};

class DataPreparation {
 public:
  DataPreparation(const Recipe& recipe, std::filesystem::path expdir,
                  DataPreparationOptions options);
  std::vector<SectionSummary> run();
  SectionSummary prepare(const std::string& section);

 private:
  std::vector<std::string> keep_selected(const std::vector<std::string>& order,
                                         const std::set<std::string>& selected);
  std::set<std::string> used_sections() const;
  // The preprocessed section whose store_dir is this section's meanandvar_dir (nullptr when it
  // computes its own statistics or no section does).
  const ConfigSection* statistics_producer(const ConfigSection& section) const;
  bool needs_statistics(const ConfigSection& section) const;
  // A section whose statistics are neither made in this run nor on disk is an error, before
  // any work starts.
  void check_statistics_exist(const std::vector<std::string>& order) const;
  const Recipe& recipe_;
  std::filesystem::path expdir_;
  DataPreparationOptions options_;
};

}  // namespace nabu
