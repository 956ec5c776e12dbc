#include <algorithm>
#include <iostream>

#include "nabu/cli/commands/cli.h"
#include "nabu/catalog/catalog.h"
#include "nabu/core/error.h"

namespace nabu::cli {

int cmd_list(const std::vector<std::string>& args) {
  std::string family;
  po::options_description description("Options");
  description.add_options()("family", po::value(&family),
                            "only this family (architecture, loss_type, processor, ...)")(
      "options", "also list each component's config keys with defaults and help");
  po::positional_options_description positional;
  positional.add("family", 1);
  if (!parse_command_line("list", "Lists the registered components.", args, description,
                          &positional))
    return 0;
  bool with_options = std::find(args.begin(), args.end(), "--options") != args.end();
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
  if (!found) throw Error("unknown family '" + family + "'");
  return 0;
}

}  // namespace nabu::cli
