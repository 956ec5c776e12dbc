// Sequence scorers compare the label sequences a recognition task decoded with reference
// transcriptions (docs/recognition.md). One class per scorer.cfg `score_type` of a recognition
// task, built from its task section through sequence_scorer_registry() (the signal scorers of
// separation tasks are scorer_registry()'s; `nabu list score_type` shows both). Reading the
// references and writing the results is the caller's job.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/options.h"
#include "nabu/core/registry.h"

namespace nabu {

// Keys every sequence scorer accepts.
struct SequenceScorerOptions {
  std::string score_type;
  std::string references;  // database section of the reference transcriptions (required)
  void declare(OptionsReader& r);
};

class SequenceScorer {
 public:
  virtual ~SequenceScorer() = default;
  virtual const SequenceScorerOptions& options() const = 0;
  const std::string& type() const { return options().score_type; }

  // Scores one utterance's hypothesis against its reference and adds it to the totals; returns
  // the utterance's scores (results_<task>_<type>_complete.json).
  virtual nlohmann::json add(const std::vector<std::string>& reference,
                             const std::vector<std::string>& hypothesis) = 0;
  // The totals over every utterance added (results_<task>_<type>_summary.json).
  virtual nlohmann::json summary() const = 0;
  // One line for the log; `decoder` names how the hypotheses were made.
  virtual std::string summary_line(const std::string& decoder) const = 0;
};

using SequenceScorerPtr = std::shared_ptr<SequenceScorer>;
using SequenceScorerRegistry = Registry<SequenceScorerPtr, const ConfigSection&>;
SequenceScorerRegistry& sequence_scorer_registry();

// Builds the scorer the section's `score_type` names (exactly one); an unknown name or a bad key
// is a ConfigError naming file:line and key.
SequenceScorerPtr make_sequence_scorer(const ConfigSection& section);
// Every problem of the section for `nabu check`, by the scorer's own options.
std::vector<std::string> check_sequence_scorer(const ConfigSection& section);

}  // namespace nabu
