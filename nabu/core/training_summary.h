// What a training run handed back, stage by stage (<expdir>/training_summary.json): how many
// updates each stage made, which of them its best validation chose and what the stage started
// from. A stage whose best validated model is its step 0 returned its starting point; when every
// stage back to a fresh initialisation did, the final model is untrained. nabu train says so at
// its end, nabu test and nabu separate --expdir repeat it (docs/trainer.md, "When validation
// never improves").
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace nabu {

struct StageOutcome {
  std::string stage;         // segment length
  int64_t steps = 0;         // updates made
  int64_t best_step = -1;    // the update of the stage's model (-1: the stage did not validate)
  int64_t validations = 0;   // validations made, step 0's included
  std::string started_from;  // "a fresh initialisation", "the model of stage 100", "init_file X"
  bool fresh_start = false;  // started from a fresh initialisation
  bool returned_its_start() const { return best_step == 0; }
};

struct TrainingSummary {
  std::vector<StageOutcome> stages;
  std::string final_model;
  // The final model is a fresh initialisation's: every stage returned its start.
  bool final_model_untrained() const;
  // One line per stage that returned its start, and one for an untrained final model.
  std::vector<std::string> warnings() const;
  // What concerns the final model (nabu test, nabu separate): untrained or unchanged from its
  // start, or the last stage's updates discarded; empty when the last stage improved.
  std::vector<std::string> final_model_warnings() const;
};

// The warning of one stage that returned its start (empty when it did not).
std::string stage_warning(const StageOutcome& outcome);

// Reads <expdir>/training_summary.json; an experiment without one (trained before it existed, or
// not trained) gives an empty summary. An unreadable file is a one-line Error naming it.
TrainingSummary read_training_summary(const std::filesystem::path& expdir);
void write_training_summary(const std::filesystem::path& expdir, const TrainingSummary& summary);

}  // namespace nabu
