// A training run behind `nabu train` (and each run of `nabu sweep`): the experiment directory
// (the recipe as used, overrides.txt, train_options.json, run.log), the process group of a
// distributed run, and the curriculum. --resume continues the run recorded in the directory; it
// accepts the --set values the run was started with (in any order) and rejects a changed one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace nabu {

struct TrainingRunOptions {
  std::filesystem::path recipe, expdir;
  std::vector<std::string> sets;  // --set FILE:SECTION:KEY=VALUE, as given
  uint64_t seed = 1234;
  bool resume = false, overwrite = false, deterministic = false;
  // Updates per stage at most: one value for every stage or one per stage (the last repeats);
  // -1 = not given (trainer.cfg's max_steps applies).
  std::vector<int64_t> max_steps{-1};
  int dist_timeout_seconds = 300;
  int liveness_timeout_seconds = 20;  // 0 = no liveness check
  // --device; empty: trainer.cfg's device. Not recorded: a resumed run may use another device.
  std::string device;
};

void run_training(const TrainingRunOptions& options);

// Where the training in `expdir` is: "after update 12 of stage 100" from the newest stage's
// metrics.jsonl; empty when nothing was trained yet. For the messages of --max-restarts.
std::string training_position(const std::filesystem::path& expdir);

// Parses --max-steps: "N" or "N1,N2,..." (integers >= -1); throws Error naming the option.
std::vector<int64_t> parse_max_steps(const std::string& text);

}  // namespace nabu
