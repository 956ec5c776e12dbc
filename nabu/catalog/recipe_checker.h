// The checks of `nabu check` (recipe_check.h) as one object over a loaded recipe: each check
// reports its problems and warnings into the CheckReport. Defined in recipe_check.cpp (files,
// data, models, training and validation) and recipe_check_postprocessing.cpp (test tasks and their
// postprocessing). Internal to catalog/.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nabu/catalog/recipe_check.h"
#include "nabu/core/recipe.h"
#include "nabu/neuralnetworks/task_definition.h"
#include "nabu/neuralnetworks/trainers/trainer_options.h"
#include "nabu/processing/data_list.h"
#include "nabu/processing/processor.h"

namespace nabu {

namespace fs = std::filesystem;

class RecipeChecker {
 public:
  RecipeChecker(const fs::path& dir, const std::vector<ConfigOverride>& overrides,
                CheckReport& report);

  void run();

 private:
  // A file that does not parse is one problem, reported by Recipe::load with its line; the checks
  // that would read it are skipped rather than report what its absence implies.
  bool unreadable(const std::string& file) const { return recipe_.unreadable().count(file) > 0; }

  // The lines of a section's list files, read once per check whichever check asks; null when a
  // list is missing (check_database reports that).
  const std::vector<DataLine>* data_lines(const std::vector<std::string>& files);

  void problem(const std::string& message) { report_.problems.push_back(message); }
  void warning(const std::string& message) { report_.warnings.push_back(message); }

  // Runs a check; an Error it throws becomes one problem.
  bool guard(const std::function<void()>& check);

  // The sections `nabu data` prepares for this recipe (its own plan: those the tasks use, and
  // transitively those computing their statistics or numbering their labels); empty = all (a
  // recipe of data alone, or task files whose problems are reported where they are checked).
  std::set<std::string> prepared_sections();

  void check_database();

  // The same rules ModelBank applies when it builds the models.
  void check_models(const ConfigFile& models);

  // The processor config of a database section, by the processor's own checker.
  void check_processor(const ConfigSection& section);

  // The database sections reconstructor.cfg names (org_mix ...): their frames are inverted.
  std::set<std::string> reconstructed_sections() const;

  // The references of a task section: data sections, nodes and models, the loss.
  void check_task(const ConfigSection& section, TaskRole role, const ConfigSection* evaluator);

  // The losses that read `usedbins` (deep clustering and its kin) split an output's last
  // dimension into F x D, F the bins of usedbins: a model output_dims that F does not divide
  // fails at the first update.
  void check_embedding_dims(const ConfigSection& section, const TaskSpec& spec);

  // The builder's own rules: ModelGraph's constructor throws the first of these. Against a
  // model.cfg that is missing or does not parse (already its one problem) the graph is not checked.
  void check_graph(const ConfigSection& section);

  void check_trainer(const ConfigFile& trainer);

  // A whole-utterance stage whose batch is larger than a task's training list leaves no batch
  // (nabu train refuses it); segment stages cut more examples than utterances, and dynamic
  // mixing makes its own, so only the whole-utterance stage is known here.
  void check_training_batches(const ConfigFile& trainer, const TrainerOptions& options);

  void check_validation(const ConfigFile& validation);

  void check_test(const ConfigFile& test);

  // A reconstructor's nrs estimates are scored against the org_src references: as many as the
  // first utterance of that list has sources.
  void check_source_count(const ConfigFile* reconstructors, const ConfigFile* scorers,
                          const std::string& task);

  // The database sections a reconstructor.cfg / scorer.cfg task section points at must exist.
  void check_references(const ConfigFile* file, const std::string& task,
                        const std::vector<std::string>& keys);

  // The reconstructor and scorers of a test task, by their own checkers.
  void check_postprocessing(const ConfigFile* reconstructors, const ConfigFile* scorers,
                            const std::string& task);

  // What depends on the data's sample rate and the features' framing (recipe_check_rates.cpp):
  // a loss that frames the signal itself (its sample_rate, winlen, winstep and nfft must be the
  // input's), the output it splits into frequency bins x speakers, and scorers that take some
  // rates only (pesq). Each problem is reported once, however many tasks share the key.
  void check_rate_dependent_keys(const ConfigSection& task, const TaskSpec& spec);
  void check_scorer_rates(const ConfigSection& scorer);
  // A reconstructor masks org_mix's spectrum with the task's first output: as many bins.
  void check_reconstructed_bins(const ConfigSection& task, const ConfigSection& reconstructor);
  // A database section's data rate (its first utterance's) and its processor's framing.
  struct SectionAudio {
    int rate = 0;                     // 0: unknown (missing list, not audio)
    std::string utterance;            // the first utterance, "<id>, <list>:<line>"
    const FeatureOptions* features = nullptr;  // null: no framed features (raw samples, labels)
    const ConfigSection* processor = nullptr;
  };
  const SectionAudio& section_audio(const std::string& database_section);
  void rate_problem(const std::string& where, const std::string& message);

  CheckReport& report_;
  Recipe recipe_;
  const ConfigFile* database_ = nullptr;
  const ConfigFile* loss_cfg_ = nullptr;
  bool missing_reconstructors_reported_ = false;
  std::vector<std::string> training_tasks_;
  std::vector<std::string> stage_segments_;  // trainer.cfg's segment_lengths, once read
  bool dynamic_mixing_ = false;
  std::map<std::vector<std::string>, std::vector<DataLine>> data_lines_;  // by list files
  std::map<std::string, SectionAudio> section_audio_;
  std::map<std::string, ProcessorPtr> processors_;  // owning section_audio_'s features
  std::set<std::string> rate_problems_reported_;    // by file:line [section] key
};

}  // namespace nabu
