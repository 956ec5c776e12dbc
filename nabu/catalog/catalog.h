// The component families, for `nabu list` and `nabu check`.
#pragma once

#include <filesystem>
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
  // The problems the component's own checker finds in a section (empty when it has none).
  std::function<std::vector<std::string>(const std::string&, const ConfigSection&)> check;
};

const std::vector<CatalogEntry>& catalog();

// The documented INI of one component: a comment with its help, the section it goes in (with the
// key that selects it) and every key with its default and help. Keys without a usable default
// (the component's checker rejects the default: a required value) are written commented out.
std::string default_config_text(const CatalogEntry& family, const std::string& name);
// Writes <dir>/<family>/<name>.cfg for every registered component (config/defaults/ in the
// repository, kept in sync by a test); returns the files written, relative to `dir`.
std::vector<std::string> write_default_configs(const std::filesystem::path& dir);

}  // namespace nabu
