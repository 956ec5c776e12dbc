// The training run behind `nabu train` (and `nabu sweep`): experiment directory, recipe copy,
// curriculum stages, val_sum.json.
#pragma once

#include <string>

#include "nabu/cli/commands/cli.h"

namespace nabu::cli {

struct TrainingRunOptions {
  CommonOptions common;
  bool resume = false, overwrite = false, deterministic = false;
  int64_t max_steps = -1;
  int workers = 1;
  int dist_timeout_seconds = 300;
};

int run_training(const TrainingRunOptions& options);

}  // namespace nabu::cli
