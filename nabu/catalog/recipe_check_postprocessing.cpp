// The test tasks of `nabu check` (recipe_checker.h): each test task's kind (separation,
// recognition, speaker verification), the database sections its postprocessing names, the
// reconstructor's and scorers' own checkers, and the estimates against the references.
#include "nabu/catalog/recipe_checker.h"
#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/evaluation/evaluation_run.h"
#include "nabu/evaluation/recognition.h"
#include "nabu/inference/reconstructors/reconstructor.h"
#include "nabu/evaluation/scorers/scorer.h"
#include "nabu/evaluation/speaker_verification.h"
#include "nabu/processing/database_section.h"

namespace nabu {

void RecipeChecker::check_test(const ConfigFile& test) {
  const ConfigSection* evaluator = test.find_section("evaluator");
  if (!evaluator) {
    problem(test.path() + ": no [evaluator] section");
    return;
  }
  std::vector<std::string> tasks;
  if (!guard([&] { tasks = evaluator->get_list("tasks"); })) return;
  const ConfigFile* reconstructors = recipe_.find("reconstructor.cfg");
  const ConfigFile* scorers = recipe_.find("scorer.cfg");
  for (const auto& task : tasks) {
    const ConfigSection* section = test.find_section(task);
    if (!section) {
      problem(evaluator->where("tasks") + ": task '" + task + "' has no section" +
              did_you_mean(task, test.section_names()));
      continue;
    }
    check_task(*section, TaskRole::kTest, evaluator);
    if (std::string message = unsupported_output_handling(*section); !message.empty()) {
      problem(message);
      continue;
    }
    if (is_speaker_verification_task(*section)) {
      // Speaker vectors scored in trials (evaluation/speaker_verification.h).
      for (const auto& message : check_speaker_verification_task(recipe_, task, tasks))
        problem(message);
      // The database sections they name (a missing section is reported above).
      const ConfigFile* handlers = recipe_.find("speaker_verification_handler.cfg");
      if (handlers && handlers->has_section(task)) check_references(handlers, task, {"usedbins"});
      const ConfigFile* verifiers = recipe_.find("speaker_verification_scorer.cfg");
      for (const auto& name : speaker_verification_scorer_names(*section))
        if (verifiers && verifiers->has_section(name))
          check_references(verifiers, name, {"spkinfo"});
      continue;
    }
    if (is_recognition_task(recipe_, task)) {
      // Decoded and scored by error rate (docs/recognition.md): no reconstructor.
      for (const auto& message : check_recognition_task(recipe_, task)) problem(message);
      check_references(recipe_.find("decoder.cfg"), task, {"alphabet"});
      // Unscored recognition is allowed (nabu test warns): only a present section is checked.
      if (scorers && scorers->has_section(task)) check_references(scorers, task, {"references"});
      continue;
    }
    if (!reconstructors && !unreadable("reconstructor.cfg") && !missing_reconstructors_reported_) {
      problem(recipe_.dir().string() + ": missing reconstructor.cfg");
      missing_reconstructors_reported_ = true;
    }
    check_references(reconstructors, task, {"org_mix", "usedbins"});
    check_references(scorers, task, {"org_src", "base", "spkinfo", "noise"});
    check_postprocessing(reconstructors, scorers, task);
    check_source_count(reconstructors, scorers, task);
    if (const ConfigSection* reconstructor =
            reconstructors ? reconstructors->find_section(task) : nullptr)
      check_reconstructed_bins(*section, *reconstructor);
  }
}

void RecipeChecker::check_source_count(const ConfigFile* reconstructors, const ConfigFile* scorers,
                                       const std::string& task) {
  const ConfigSection* reconstructor =
      reconstructors ? reconstructors->find_section(task) : nullptr;
  const ConfigSection* scorer = scorers ? scorers->find_section(task) : nullptr;
  if (!database_ || !reconstructor || !scorer || !reconstructor->has("nrs") ||
      !scorer->has("org_src"))
    return;
  guard([&] {
    const long long estimates = reconstructor->get_int("nrs");
    const std::string name = scorer->get_string("org_src");
    const ConfigSection* data = database_->find_section(name);
    if (!data) return;  // reported by check_references
    const auto* read = data_lines(read_database_section(*data, *database_).datafiles);
    if (!read || read->empty() || static_cast<long long>(read->front().fields.size()) == estimates)
      return;
    const auto& lines = *read;
    problem(reconstructor->where("nrs") + ": " + std::to_string(estimates) +
            " estimates per utterance, but scorer.cfg [" + task + "] org_src = " + name +
            " holds " + std::to_string(lines.front().fields.size()) + " reference(s) (" +
            lines.front().utterance + ", " + lines.front().origin + ")");
  });
}

void RecipeChecker::check_references(const ConfigFile* file, const std::string& task,
                                     const std::vector<std::string>& keys) {
  if (!file || !database_) return;
  const ConfigSection* section = file->find_section(task);
  if (!section) {
    problem(file->path() + ": no section for test task [" + task + "]");
    return;
  }
  for (const auto& key : keys) {
    if (!section->has(key)) continue;
    std::string name = section->get_string(key);
    if (!database_->has_section(name))
      problem(section->where(key) + ": no database.conf section [" + name + "]" +
              did_you_mean(name, database_->section_names()));
  }
}

void RecipeChecker::check_postprocessing(const ConfigFile* reconstructors,
                                         const ConfigFile* scorers, const std::string& task) {
  if (const ConfigSection* section =
          reconstructors ? reconstructors->find_section(task) : nullptr) {
    std::string type;
    if (guard([&] { type = trim(section->get_string("reconstruct_type")); })) {
      if (!reconstructor_registry().contains(type))
        problem(section->where("reconstruct_type") + ": " +
                reconstructor_registry().unknown_message(type));
      else
        for (const auto& message : reconstructor_registry().check(type, *section)) problem(message);
    }
  }
  if (const ConfigSection* section = scorers ? scorers->find_section(task) : nullptr) {
    std::vector<std::string> types;
    if (!guard([&] { types = split_whitespace(section->get_string("score_type")); })) return;
    if (types.empty()) problem(section->where("score_type") + ": names no scorer");
    for (const auto& type : types) {
      if (!scorer_registry().contains(type)) {
        problem(section->where("score_type") + ": " + scorer_registry().unknown_message(type));
        continue;
      }
      for (const auto& message : scorer_registry().check(type, *section)) problem(message);
    }
    check_scorer_rates(*section);
  }
}

}  // namespace nabu
