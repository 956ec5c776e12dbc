// `nabu recipe new`: a recipe for a prepared corpus (nabu prepare), made from a shipped recipe
// (docs/own_data.md). The lists of the recipe's training corpus become the prepared corpus's,
// its stores get a folder of their own, and what depends on the sample rate is set for the
// corpus's rate; test tasks on other corpora are left out.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace nabu {

struct RecipeFromCorpusOptions {
  std::filesystem::path from;      // the recipe to start from
  std::filesystem::path prepared;  // a folder nabu prepare wrote (prepared.json)
  std::filesystem::path out;       // the new recipe folder (must not exist)
};

struct RecipeFromCorpusResult {
  int sample_rate = 0;
  std::vector<std::string> changes;  // one line per change, also in the recipe's README.md
};

// Writes the new recipe, whole or not at all, after `nabu check`'s rules passed on it; throws
// Error naming what does not fit (a list the prepared corpus does not have, a check problem).
RecipeFromCorpusResult make_recipe_from_corpus(const RecipeFromCorpusOptions& options);

}  // namespace nabu
