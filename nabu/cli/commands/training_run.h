// The training run behind `nabu train` (and `nabu sweep`): experiment directory, recipe copy,
// curriculum stages, val_sum.json.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "nabu/cli/commands/cli.h"

namespace nabu::cli {

struct TrainingRunOptions {
  CommonOptions common;
  bool resume = false, overwrite = false, deterministic = false;
  // Updates per stage at most: one value for every stage or one per stage (the last repeats);
  // -1 = no limit. Given as "--max-steps=700" or "--max-steps=700,50".
  std::vector<int64_t> max_steps{-1};
  int64_t max_steps_of_stage(std::size_t stage) const {
    return max_steps.empty() ? -1 : max_steps[std::min(stage, max_steps.size() - 1)];
  }
  int workers = 1;
  int dist_timeout_seconds = 300;
};

int run_training(const TrainingRunOptions& options);

// Parses --max-steps: "N" or "N1,N2,..." (integers >= -1); throws Error naming the option.
std::vector<int64_t> parse_max_steps(const std::string& text);

}  // namespace nabu::cli
