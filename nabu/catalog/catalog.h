// The component families, for `nabu list` and `nabu check`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nabu/core/options.h"

namespace nabu {

struct CatalogEntry {
  std::string family;
  std::function<std::vector<std::string>()> names;
  std::function<std::string(const std::string&)> help;
  std::function<std::vector<OptionDoc>(const std::string&)> options;
};

const std::vector<CatalogEntry>& catalog();

}  // namespace nabu
