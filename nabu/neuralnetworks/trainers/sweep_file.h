// The original's sweep file (docs/trainer.md, "Sweeps"): blocks separated by blank lines; a block
// is an experiment name followed by lines "file section option value...", the value being the
// remaining tokens joined by single spaces (e.g. "trainer.cfg trainer batch_size 20 4").
#pragma once

#include <string>
#include <vector>

#include "nabu/core/config.h"

namespace nabu {

struct SweepBlock {
  std::string name;
  std::vector<ConfigOverride> overrides;
  std::vector<std::string> descriptions() const;  // "file:section:option=value"
};

// Throws ConfigError naming file:line for a malformed line or a repeated name.
std::vector<SweepBlock> parse_sweep_text(const std::string& text, const std::string& file_name);
std::vector<SweepBlock> parse_sweep_file(const std::string& path);

}  // namespace nabu
