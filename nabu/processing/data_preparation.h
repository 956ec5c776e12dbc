// `nabu data`: every database.conf section with preprocess = True becomes one HDF5 store per
// segment length. Sections run in dependency order (explicit `dependencies` plus the section
// that computes the meanandvar_dir statistics), whatever their order in the file; a section
// counts as done only when all its stores are complete.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "nabu/core/recipe.h"

namespace nabu {

// Sections with preprocess = True in the order they must be prepared. Throws ConfigError for a
// dependency cycle or a dependency that names no section.
std::vector<std::string> preparation_order(const ConfigFile& database);

struct SectionSummary {
  std::string section;
  bool skipped = false;  // already complete
  int64_t utterances = 0, examples = 0, frames = 0, bytes = 0;
  double audio_seconds = 0, wall_seconds = 0;
};

struct DataPreparationOptions {
  int workers = 0;               // utterances processed in parallel; 0 = all cores
  std::vector<std::string> sections;  // only these (and nothing else); empty = all
};

class DataPreparation {
 public:
  DataPreparation(const Recipe& recipe, std::filesystem::path expdir,
                  DataPreparationOptions options);
  std::vector<SectionSummary> run();
  SectionSummary prepare(const std::string& section);

 private:
  const Recipe& recipe_;
  std::filesystem::path expdir_;
  DataPreparationOptions options_;
};

}  // namespace nabu
