#include "nabu/neuralnetworks/trainers/sweep_file.h"

#include <set>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"

namespace nabu {

std::vector<std::string> SweepBlock::descriptions() const {
  std::vector<std::string> out;
  for (const auto& override_ : overrides) out.push_back(override_.spec);
  return out;
}

std::vector<SweepBlock> parse_sweep_text(const std::string& text, const std::string& file_name) {
  std::vector<SweepBlock> blocks;
  std::set<std::string> names;
  SweepBlock current;
  bool in_block = false;
  int number = 0;
  auto finish = [&] {
    if (!in_block) return;
    blocks.push_back(std::move(current));
    current = SweepBlock();
    in_block = false;
  };
  for (const auto& raw : split(text, '\n')) {
    ++number;
    std::string line = trim(raw);
    std::string where = file_name + ":" + std::to_string(number);
    if (line.empty()) {
      finish();
      continue;
    }
    if (line[0] == '#') continue;
    auto tokens = split_whitespace(line);
    if (!in_block) {
      if (tokens.size() != 1)
        throw ConfigError(where + ": expected an experiment name (one word), got '" +
                          shorten(line) + "'");
      if (!names.insert(tokens[0]).second)
        throw ConfigError(where + ": experiment name '" + tokens[0] + "' is used twice");
      current.name = tokens[0];
      in_block = true;
      continue;
    }
    if (tokens.size() < 4)
      throw ConfigError(where + ": expected 'file section option value...', got '" +
                        shorten(line) + "'");
    std::vector<std::string> value(tokens.begin() + 3, tokens.end());
    current.overrides.push_back(ConfigOverride::parse(tokens[0] + ":" + tokens[1] + ":" +
                                                      tokens[2] + "=" + join(value, " ")));
  }
  finish();
  if (blocks.empty()) throw ConfigError(file_name + ": no experiment in the sweep file");
  return blocks;
}

std::vector<SweepBlock> parse_sweep_file(const std::string& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error&) {
    throw ConfigError(path + ": cannot read the sweep file");
  }
  return parse_sweep_text(text, path);
}

}  // namespace nabu
