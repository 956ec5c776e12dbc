#include "nabu/catalog/recipe_sections.h"

#include <algorithm>
#include <filesystem>

#include "nabu/neuralnetworks/task_definition.h"
#include "nabu/neuralnetworks/trainers/trainer_options.h"
#include "nabu/evaluation/speaker_verification.h"

namespace nabu {

namespace {

using Uses = std::map<std::string, std::vector<std::string>>;

std::string file_name(const ConfigFile& file) {
  return std::filesystem::path(file.path()).filename().string();
}

void add_task(Uses& uses, const ConfigFile& file, const ConfigSection& section, TaskRole role,
              const ConfigSection* evaluator) {
  TaskSpec spec = read_task_spec(section, role, evaluator);
  for (const auto& set : spec.linked_sets)
    for (const auto* bindings : {&set.inputs, &set.targets})
      for (const auto& binding : *bindings)
        for (const auto& name : binding.sections)
          uses[name].push_back(file_name(file) + " [" + section.name() + "] " +
                               (set.name == "set0" ? "" : set.name + "_") + binding.name);
}

// reconstructor.cfg / scorer.cfg: the keys of a test task's section that name sections.
void add_references(Uses& uses, const ConfigFile* file, const std::string& task,
                    const std::vector<std::string>& keys) {
  const ConfigSection* section = file ? file->find_section(task) : nullptr;
  if (!section) return;
  for (const auto& key : keys)
    for (const auto& name : section->get_list(key, {}))
      uses[name].push_back(file_name(*file) + " [" + task + "] " + key);
}

}  // namespace

Uses sections_used_by_tasks(const Recipe& recipe) {
  Uses uses;
  std::vector<std::string> training_tasks;
  if (const ConfigFile* trainer = recipe.find("trainer.cfg")) {
    training_tasks = read_trainer_options(*trainer).tasks;
    for (const auto& task : training_tasks)
      add_task(uses, *trainer, trainer->section(task), TaskRole::kTrain, nullptr);
  }
  if (const ConfigFile* validation = recipe.find("validation_evaluator.cfg")) {
    const ConfigSection& evaluator = validation->section("evaluator");
    if (evaluator.get_string("evaluator", "") != "None") {
      auto excluded = evaluator.get_list("tasks_excluded_for_val", {});
      for (const auto& task : training_tasks)
        if (std::find(excluded.begin(), excluded.end(), task) == excluded.end())
          add_task(uses, *validation, validation->section(task), TaskRole::kValidation,
                   &evaluator);
    }
  }
  if (const ConfigFile* test = recipe.find("test_evaluator.cfg")) {
    const ConfigSection& evaluator = test->section("evaluator");
    for (const auto& task : evaluator.get_list("tasks", {})) {
      add_task(uses, *test, test->section(task), TaskRole::kTest, &evaluator);
      const ConfigSection* section = test->find_section(task);
      if (section && is_speaker_verification_task(*section)) {
        // The handler's used bins; the scorers' speaker lists are read as they are.
        add_references(uses, recipe.find("speaker_verification_handler.cfg"), task, {"usedbins"});
        continue;
      }
      add_references(uses, recipe.find("reconstructor.cfg"), task, {"org_mix", "usedbins"});
      add_references(uses, recipe.find("scorer.cfg"), task, {"org_src", "base", "spkinfo", "noise"});
    }
  }
  return uses;
}

}  // namespace nabu
