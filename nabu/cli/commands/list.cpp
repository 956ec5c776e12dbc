// `nabu list`: the registered components and their keys; --write-defaults writes one documented
// INI per component (config/defaults/ in the repository).
#include <algorithm>
#include <iostream>

#include "nabu/catalog/catalog.h"
#include "nabu/cli/commands/cli.h"
#include "nabu/core/error.h"
#include "nabu/core/strings.h"

namespace nabu::cli {

int cmd_list(const std::vector<std::string>& args) {
  // `nabu list models`: the shipped trained models (`nabu models` is the older name).
  if (!args.empty() && args.front() == "models")
    return cmd_models(std::vector<std::string>(args.begin() + 1, args.end()));
  std::string family, write_defaults;
  bool with_options = false;
  po::options_description description("Options");
  description.add_options()
      ("family", po::value(&family), "only this family (architecture, loss_type, processor, ...)")
      ("options", switch_value(&with_options),
       "also list each component's config keys with defaults and help")
      ("write-defaults", po::value(&write_defaults),
       "write DIR/<family>/<name>.cfg: one documented INI per component with every key and its\n"
       "default (the repository keeps them in config/defaults)");
  po::positional_options_description positional;
  positional.add("family", 1);
  if (!parse_command_line("list",
                          "Lists the registered components (nabu list models: the shipped "
                          "trained models).",
                          args, description,
                          &positional))
    return 0;
  if (!write_defaults.empty()) {
    auto written = write_default_configs(write_defaults);
    std::cout << "wrote " << written.size() << " files under " << write_defaults << "\n";
    return 0;
  }
  bool found = false;
  for (const auto& entry : catalog()) {
    if (!family.empty() && family != entry.family) continue;
    found = true;
    std::cout << entry.family << ":\n";
    for (const auto& name : entry.names()) {
      std::cout << "  " << name << "  -  " << entry.help(name) << "\n";
      if (with_options)
        for (const auto& doc : entry.options(name))
          std::cout << "      " << doc.key << (doc.default_value.empty() ? "" : " = ")
                    << doc.default_value << "   " << doc.help << "\n";
    }
  }
  if (!found) {
    std::vector<std::string> families;
    for (const auto& entry : catalog()) families.push_back(entry.family);
    throw Error("unknown family '" + family + "'" + did_you_mean(family, families) +
                "; known: " + join(families, ", "));
  }
  return 0;
}

}  // namespace nabu::cli
