// `nabu data`: every database.conf section with preprocess = True becomes one HDF5 store per
// segment length. `nabu data` prepares the sections the recipe's tasks use (and those computing
// their statistics); --all-sections or --section choose otherwise. Sections run in dependency
// order (explicit `dependencies` plus the sections that compute the meanandvar_dir statistics and
// the label2index_dir numbering), whatever their order in the file; a section counts as done only
// when all its stores are complete.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "nabu/core/recipe.h"
#include "nabu/processing/section_plan.h"

namespace nabu {

struct SectionSummary {
  std::string section;
  bool skipped = false;  // already complete
  int64_t utterances = 0, examples = 0, frames = 0, bytes = 0;
  double audio_seconds = 0, wall_seconds = 0;
};

struct DataPreparationOptions : SectionChoice {
  int workers = 0;  // utterances processed in parallel; 0 = all cores
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
