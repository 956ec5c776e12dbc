#include "nabu/catalog/recipe_check.h"

#include <torch/cuda.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "nabu/catalog/recipe_checker.h"
#include "nabu/catalog/recipe_sections.h"
#include "nabu/core/error.h"
#include "nabu/core/recipe.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/evaluators/evaluator.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/neuralnetworks/models/model_bank.h"
#include "nabu/neuralnetworks/models/model_graph.h"
#include "nabu/neuralnetworks/task_definition.h"
#include "nabu/neuralnetworks/trainers/trainer_options.h"
#include "nabu/evaluation/evaluation_run.h"
#include "nabu/evaluation/recognition.h"
#include "nabu/inference/reconstructors/reconstructor.h"
#include "nabu/evaluation/scorers/scorer.h"
#include "nabu/evaluation/speaker_verification.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/data_list.h"
#include "nabu/processing/database_section.h"
#include "nabu/processing/feature_computer.h"
#include "nabu/processing/processor.h"
#include "nabu/processing/section_plan.h"

namespace nabu {

namespace {

// Whether `path` is `folder` or lies under it.
bool holds(const fs::path& folder, const fs::path& path) {
  const fs::path relative = fs::absolute(path).lexically_normal().lexically_relative(
      fs::absolute(folder).lexically_normal());
  return !relative.empty() && *relative.begin() != "..";
}

}  // namespace

RecipeChecker::RecipeChecker(const fs::path& dir, const std::vector<ConfigOverride>& overrides,
                             CheckReport& report)
    : report_(report) {
  recipe_ = Recipe::load(dir, overrides, &report_.problems);
  report_.files_checked = static_cast<int>(recipe_.file_names().size());
  for (const auto& warning : recipe_.warnings()) report_.warnings.push_back(warning);
}

void RecipeChecker::run() {
  for (const char* required : {"database.conf", "model.cfg", "trainer.cfg",
                               "validation_evaluator.cfg", "test_evaluator.cfg", "scorer.cfg"})
    if (!recipe_.has(required) && !unreadable(required))
      problem(recipe_.dir().string() + ": missing " + std::string(required));
  database_ = recipe_.find("database.conf");
  loss_cfg_ = recipe_.find("loss.cfg");
  if (database_) check_database();
  if (const ConfigFile* models = recipe_.find("model.cfg")) check_models(*models);
  if (const ConfigFile* trainer = recipe_.find("trainer.cfg")) check_trainer(*trainer);
  if (const ConfigFile* validation = recipe_.find("validation_evaluator.cfg"))
    check_validation(*validation);
  // Which test tasks are recognition tasks is decoder.cfg's to say.
  const ConfigFile* test = recipe_.find("test_evaluator.cfg");
  if (test && !unreadable("decoder.cfg")) check_test(*test);
}

const std::vector<DataLine>* RecipeChecker::data_lines(const std::vector<std::string>& files) {
  for (const auto& file : files)
    if (!fs::exists(file)) return nullptr;
  auto cached = data_lines_.find(files);
  if (cached == data_lines_.end())
    cached = data_lines_.emplace(files, read_data_lines(files)).first;
  return &cached->second;
}

bool RecipeChecker::guard(const std::function<void()>& check) {
  try {
    check();
    return true;
  } catch (const Error& e) {
    problem(e.what());
    return false;
  }
}

std::set<std::string> RecipeChecker::prepared_sections() {
  if (!recipe_.has("trainer.cfg") && !recipe_.has("test_evaluator.cfg")) return {};
  try {
    SectionChoice choice;
    choice.used_sections = sections_used_by_tasks(recipe_);
    return sections_for_tasks(recipe_, choice, /*log=*/false);
  } catch (const Error&) {
    return {};
  }
}

void RecipeChecker::check_database() {
  const std::set<std::string> prepared = prepared_sections();
  bool relative_missing = false;
  for (const auto& section : database_->sections()) {
    if (section.name() == "globalvars") continue;
    guard([&] {
      auto options = read_database_section(section, *database_);
      // A list of a section no task uses is missing for nothing (nabu data skips the section):
      // a warning; a recipe copied from a family keeps its siblings' sections.
      const bool skipped = !prepared.empty() && !prepared.count(section.name());
      for (const auto& file : options.datafiles)
        if (!fs::exists(file)) {
          relative_missing = relative_missing || fs::path(file).is_relative();
          const std::string message = section.where("datafiles") + ": '" + file +
                                      "' does not exist" + generation_hint(file);
          if (skipped)
            warning(message + " (no task uses [" + section.name() + "]; nabu data skips it)");
          else
            problem(message);
        }
      // Documentation in the original, which never reads it: a warning, not a problem.
      for (const auto& dependency : options.dependency_names())
        if (!database_->has_section(dependency))
          warning(section.where("dependencies") + ": no section [" + dependency + "]" +
                  did_you_mean(dependency, database_->section_names()) +
                  " (documentation only; nothing waits for it)");
      if (!options.processor_config.empty() &&
          !unreadable(fs::path(options.processor_config).filename().string()))
        check_processor(section);
    });
  }
  // Run from another folder, every relative list is missing for that reason alone.
  if (!relative_missing) return;
  const fs::path here = fs::current_path();
  if (!holds(here, recipe_.dir()))
    warning("the recipe's relative paths are read from the working directory " + here.string() +
            ", which does not hold " + recipe_.dir().string() +
            ": the shipped recipes are run from the project root");
}

void RecipeChecker::check_models(const ConfigFile& models) {
  for (const auto& message : ModelBank::check(models)) problem(message);
}

void RecipeChecker::check_processor(const ConfigSection& section) {
  const ConfigFile& config = recipe_.processor_config(section);
  const ConfigSection* processor = config.find_section("processor");
  if (!processor) {
    problem(config.path() + ": no [processor] section (database.conf [" + section.name() + "])");
    return;
  }
  std::string type;
  if (!guard([&] { type = processor->get_string("processor"); })) return;
  if (!processor_registry().contains(type)) {
    problem(processor->where("processor") + ": " + processor_registry().unknown_message(type));
    return;
  }
  for (const auto& message : processor_registry().check(type, *processor)) problem(message);
  // The frames at the data's own rate (its first file's) should fit nfft: the analysis cuts
  // them (a warning, as in the original), the inverse STFT of a reconstruction cannot (a
  // problem: nabu test and separate would fail).
  guard([&] {
    ProcessorPtr built;
    try {
      built = make_processor(config);
    } catch (const ConfigError&) {
      return;  // the processor's checker named it above
    }
    const FeatureOptions* features = built->feature_options();
    if (!features) return;
    const auto* read = data_lines(read_database_section(section, *database_).datafiles);
    if (!read || read->empty() || read->front().fields.empty()) return;
    const auto& lines = *read;
    int rate = 0;
    try {
      rate = read_audio(lines.front().fields.front()).sample_rate;
    } catch (const DataError&) {
      return;  // not audio, or unreadable: `nabu data` names the utterance
    }
    std::string message = features->frame_problem(rate);
    if (message.empty()) return;
    message = processor->where(processor->has("nfft") ? "nfft" : "winlen") + ": " + message +
              " (the rate of utterance '" + lines.front().utterance + "', " + lines.front().origin +
              ", database.conf [" + section.name() + "])";
    if (reconstructed_sections().count(section.name()))
      problem(message + "; the separated signals cannot be put together");
    else
      warning(message + "; the analysis cuts every frame to nfft samples");
  });
}

std::set<std::string> RecipeChecker::reconstructed_sections() const {
  std::set<std::string> names;
  const ConfigFile* reconstructors = recipe_.find("reconstructor.cfg");
  if (!reconstructors || !database_) return names;
  for (const auto& section : reconstructors->sections())
    for (const auto& [key, value] : section.entries())
      if (database_->has_section(trim(value.text))) names.insert(trim(value.text));
  return names;
}

void RecipeChecker::check_task(const ConfigSection& section, TaskRole role,
                               const ConfigSection* evaluator) {
  for (const auto& message : unknown_task_keys(section, role)) problem(message);
  TaskSpec spec;
  if (!guard([&] { spec = read_task_spec(section, role, evaluator); })) return;
  if (database_) {
    for (const auto& set : spec.linked_sets)
      for (const auto* bindings : {&set.inputs, &set.targets})
        for (const auto& binding : *bindings)
          for (const auto& name : binding.sections)
            if (!database_->has_section(name))
              problem(section.where((set.name == "set0" ? "" : set.name + "_") + binding.name) +
                      ": no database.conf section [" + name + "]" +
                      did_you_mean(name, database_->section_names()));
  }
  // The stores cut at trainer.cfg's segment lengths that the task reads (docs/ini_semantics.md).
  if (database_)
    for (const auto& message :
         unstored_segment_lengths(spec, *database_, stage_segments_, dynamic_mixing_))
      problem(message);
  check_graph(section);
  check_embedding_dims(section, spec);
  check_rate_dependent_keys(section, spec);
  if (role != TaskRole::kTrain) guard([&] { evaluator_type(section, evaluator); });
  if (!unreadable("loss.cfg"))
    guard([&] {
      ConfigSection options("", {});
      std::string type = resolve_loss_type(section, loss_cfg_, &options);
      for (const auto& message : loss_registry().check(type, options)) problem(message);
    });
}

void RecipeChecker::check_embedding_dims(const ConfigSection& section, const TaskSpec& spec) {
  const ConfigFile* models = recipe_.find("model.cfg");
  const auto& names = spec.target_names;
  if (!database_ || !models || unreadable("model.cfg") || unreadable("loss.cfg") ||
      std::find(names.begin(), names.end(), "usedbins") == names.end())
    return;
  std::string type;
  try {
    ConfigSection options("", {});
    type = resolve_loss_type(section, loss_cfg_, &options);
  } catch (const Error&) {
    return;  // reported by check_task
  }
  // The _flat variants take [T, F, D] embeddings: output_dims is D there.
  if (type.size() > 5 && type.compare(type.size() - 5, 5, "_flat") == 0) return;
  for (const auto& binding : spec.linked_sets.front().targets) {
    if (binding.name != "usedbins" || binding.sections.empty()) continue;
    const ConfigSection* data = database_->find_section(binding.sections.front());
    if (!data) return;  // reported above
    int64_t bins = 0;
    try {
      auto dims = make_processor(recipe_.processor_config(*data))->nontime_dims();
      if (dims.empty()) return;
      bins = dims.back();
    } catch (const Error&) {
      return;  // the processor's problem is reported where its section is checked
    }
    for (const auto& output : spec.output_names) {
      const ConfigSection* model = models->find_section(section.get_string(output + "_model", ""));
      if (!model || !model->has("output_dims")) continue;
      long long dims = 0;
      if (!guard([&] { dims = model->get_int("output_dims"); })) continue;
      if (bins > 0 && (dims <= 0 || dims % bins != 0))
        problem(model->where("output_dims") + ": " + std::to_string(dims) +
                " is not a "
                "multiple of the " +
                std::to_string(bins) + " bins of usedbins ([" + binding.sections.front() +
                "]), which task [" + section.name() + "]'s " + type + " loss splits " + output +
                " into (bins x embedding)");
    }
  }
}

void RecipeChecker::check_graph(const ConfigSection& section) {
  const ConfigFile* models = recipe_.find("model.cfg");
  if (!models || unreadable("model.cfg")) return;
  for (const auto& message : ModelGraph::check(section, *models)) problem(message);
}

void RecipeChecker::check_trainer(const ConfigFile& trainer) {
  TrainerOptions options;
  if (!guard([&] { options = read_trainer_options(trainer); })) return;
  stage_segments_ = options.segment_lengths;
  dynamic_mixing_ = options.data.dynamic_mixing;
  for (const auto& task : options.tasks) {
    const ConfigSection* section = trainer.find_section(task);
    if (!section) {
      problem(trainer.section("trainer").where("tasks") + ": task '" + task + "' has no section" +
              did_you_mean(task, trainer.section_names()));
      continue;
    }
    check_task(*section, TaskRole::kTrain, nullptr);
  }
  check_training_batches(trainer, options);
  // fp16 needs a GPU: on a machine without one, `device = auto` computes on the CPU.
  if (options.compute.precision == "fp16" &&
      (options.compute.device == "cpu" ||
       (options.compute.device == "auto" && !torch::cuda::is_available())))
    problem(trainer.section("trainer").where("precision") +
            ": fp16 needs a CUDA device, and device = " + options.compute.device +
            " computes on the CPU" + (options.compute.device == "auto" ? " on this machine" : "") +
            " (bf16 runs on the CPU; --device=cuda trains fp16 where there is a GPU)");
  if (!options.init_file.empty() && !fs::exists(options.init_file))
    problem(trainer.section("trainer").where("init_file") + ": '" + options.init_file +
            "' does not exist");
  training_tasks_ = options.tasks;
}

void RecipeChecker::check_training_batches(const ConfigFile& trainer,
                                           const TrainerOptions& options) {
  if (!database_ || options.data.dynamic_mixing) return;
  for (std::size_t i = 0; i < options.num_stages(); ++i) {
    const StageSettings stage = options.stage(i);
    if (stage.segment_length != "full") continue;
    for (const auto& task : options.tasks) {
      const ConfigSection* section = trainer.find_section(task);
      TaskSpec spec;
      if (!section || !guard([&] { spec = read_task_spec(*section, TaskRole::kTrain, nullptr); }))
        continue;
      const auto& binding = spec.linked_sets.front().inputs.front();
      int64_t utterances = 0;
      for (const auto& name : binding.sections) {
        const ConfigSection* data = database_->find_section(name);
        if (!data) return;  // reported by check_task
        const auto* lines = data_lines(read_database_section(*data, *database_).datafiles);
        if (!lines) return;
        utterances += static_cast<int64_t>(lines->size());
      }
      const auto usable = static_cast<int64_t>(utterances * spec.trainset_frac);
      if (stage.batch_size > usable)
        problem(trainer.section("trainer").where("batch_size") + ": batch_size " +
                std::to_string(stage.batch_size) + " of stage full is larger than the " +
                std::to_string(usable) + " training utterances of task [" + task + "]; lower it");
    }
  }
}

void RecipeChecker::check_validation(const ConfigFile& validation) {
  const ConfigSection* evaluator = validation.find_section("evaluator");
  if (!evaluator) {
    problem(validation.path() + ": no [evaluator] section");
    return;
  }
  if (evaluator->get_string("evaluator", "") != "None")
    guard([&] { evaluator_type(*evaluator, nullptr); });
  for (const auto& task : validated_tasks(*evaluator, training_tasks_)) {
    const ConfigSection* section = validation.find_section(task);
    if (!section) {
      problem(validation.path() + ": no section for training task [" + task + "]");
      continue;
    }
    check_task(*section, TaskRole::kValidation, evaluator);
    guard([&] { validation_metric_of(*section, evaluator); });
    for (const auto& name : section->get_list("extra_validation_sets", {})) {
      if (const ConfigSection* extra = validation.find_section(name))
        check_task(*extra, TaskRole::kValidation, evaluator);
      else
        problem(section->where("extra_validation_sets") +
                ": validation_evaluator.cfg has no section [" + name + "]");
    }
  }
}

CheckReport check_recipe(const fs::path& recipe_dir, const std::vector<ConfigOverride>& overrides) {
  CheckReport report;
  try {
    RecipeChecker checker(recipe_dir, overrides, report);
    checker.run();
  } catch (const Error& e) {
    report.problems.push_back(e.what());
  }
  // A shared section (loss.cfg, a database section) is reached from several tasks: report once.
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (auto& message : report.problems)
    if (seen.insert(message).second) unique.push_back(std::move(message));
  report.problems = std::move(unique);
  return report;
}

}  // namespace nabu
