// `nabu sweep` (docs/trainer.md, "Sweeps"): one training run per block of a sweep file (and per
// duplicate), each in <expdir>/<name> with the block's values applied like --set. A finished run
// is skipped and an unfinished one resumed, so a sweep can be rerun after an interruption. The
// summary table (<expdir>/sweep_summary.csv) has the best validation loss per stage.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nabu/neuralnetworks/trainers/training_run.h"

namespace nabu {

struct SweepOptions {
  TrainingRunOptions run;  // recipe, expdir (the sweep's root), seed, max_steps, ...
  std::filesystem::path sweep_file;
  int duplicates = 1, duplicates_offset = 0;
};

struct SweepRow {
  std::string name, status;  // "trained", "done before", "failed: ..."
  nlohmann::json val_sum;
};

struct SweepSummary {
  std::vector<SweepRow> rows;
  std::vector<std::string> columns;  // stage, or stage/task with validate_per_task
  bool failures = false;
  std::string table_text() const;    // for the console
  std::string csv() const;
};

SweepSummary run_sweep(const SweepOptions& options);

}  // namespace nabu
