#include "nabu/neuralnetworks/task_definition.h"

#include <set>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/processing/database_section.h"

namespace nabu {

namespace {

std::vector<DataBinding> bindings(const ConfigSection& section, const std::string& prefix,
                                  const std::vector<std::string>& names) {
  std::vector<DataBinding> out;
  for (const auto& name : names) {
    std::string key = prefix + name;
    auto sections = section.get_list(key);
    if (sections.empty()) section.fail(key, "names no database section");
    out.push_back({name, sections});
  }
  return out;
}

std::vector<std::string> fixed_keys(TaskRole role) {
  std::vector<std::string> keys = {"loss_type", "inputs", "outputs", "nodes", "targets",
                                   "linkedsets", "linkedset_weighting"};
  if (role == TaskRole::kTrain) keys.push_back("trainset_frac");
  if (role != TaskRole::kTrain) {
    keys.insert(keys.end(), {"requested_utts", "batch_size", "evaluator"});
  }
  // Validation by metric (docs/trainer.md), read by metric_evaluator and the trainer.
  if (role == TaskRole::kValidation)
    keys.insert(keys.end(), {"validation_metric", "metric_org_mix", "metric_usedbins",
                             "metric_org_src", "metric_references", "metric_utts",
                             "extra_validation_sets", "validation_segments"});
  if (role == TaskRole::kTest)
    keys.insert(keys.end(), {"scorers_names", "output_handling_type", "postprocessors_names"});
  return keys;
}

}  // namespace

TaskSpec read_task_spec(const ConfigSection& section, TaskRole role,
                        const ConfigSection* evaluator) {
  TaskSpec spec;
  spec.name = section.name();
  spec.role = role;
  spec.input_names = section.get_list("inputs");
  spec.target_names = section.get_list("targets", {});  // an empty targets is allowed
  spec.output_names = section.get_list("outputs");
  spec.nodes = section.get_list("nodes");
  spec.loss_type = section.get_string("loss_type");
  if (spec.input_names.empty()) section.fail("inputs", "lists no inputs");
  if (spec.output_names.empty()) section.fail("outputs", "lists no outputs");

  if (section.has("linkedsets")) {
    auto names = section.get_list("linkedsets");
    if (names.empty()) section.fail("linkedsets", "is empty");
    std::vector<double> weights(names.size(), 1.0);
    if (section.has("linkedset_weighting")) {
      weights = section.get_double_list("linkedset_weighting");
      if (weights.size() != names.size())
        section.fail("linkedset_weighting", "needs one weight per linked set");
    }
    for (std::size_t i = 0; i < names.size(); ++i) {
      LinkedSet set;
      set.name = names[i];
      set.weight = weights[i];
      set.inputs = bindings(section, names[i] + "_", spec.input_names);
      set.targets = bindings(section, names[i] + "_", spec.target_names);
      spec.linked_sets.push_back(std::move(set));
    }
  } else {
    LinkedSet set;
    set.inputs = bindings(section, "", spec.input_names);
    set.targets = bindings(section, "", spec.target_names);
    spec.linked_sets.push_back(std::move(set));
  }

  if (role == TaskRole::kTrain) {
    spec.trainset_frac = section.get_double("trainset_frac", 1.0);
    if (spec.trainset_frac <= 0 || spec.trainset_frac > 1)
      section.fail("trainset_frac", "must be in (0, 1]");
  } else {
    // docs/trainer.md: requested_utts and batch_size from the task section, else from [evaluator].
    auto pick = [&](const std::string& key) -> int {
      if (section.has(key)) return static_cast<int>(section.get_int(key));
      if (evaluator && evaluator->has(key)) return static_cast<int>(evaluator->get_int(key));
      section.fail(key, "missing here and in [evaluator]");
    };
    spec.requested_utts = pick("requested_utts");
    spec.batch_size = pick("batch_size");
    if (spec.batch_size <= 0) section.fail("batch_size", "must be positive");
    if (spec.requested_utts <= 0) section.fail("requested_utts", "must be positive");
    if (role == TaskRole::kValidation) {
      const ConfigSection& source =
          section.has("validation_segments") || !evaluator ? section : *evaluator;
      spec.validation_segments = source.get_string("validation_segments", "stage");
      if (spec.validation_segments != "stage" && spec.validation_segments != "full")
        source.fail("validation_segments", "'" + spec.validation_segments +
                                               "' is neither stage nor full");
    }
  }
  return spec;
}

std::vector<std::string> unknown_task_keys(const ConfigSection& section, TaskRole role) {
  std::set<std::string> known;
  for (const auto& key : fixed_keys(role)) known.insert(key);
  auto nodes = section.get_list("nodes", {});
  for (const auto& node : nodes)
    for (const char* suffix : {"_model", "_inputs", "_output_names"}) known.insert(node + suffix);
  std::vector<std::string> data_names = section.get_list("inputs", {});
  for (const auto& name : section.get_list("targets", {})) data_names.push_back(name);
  std::vector<std::string> sets = section.get_list("linkedsets", {});
  for (const auto& name : data_names) {
    if (sets.empty()) known.insert(name);
    for (const auto& set : sets) known.insert(set + "_" + name);
  }
  std::vector<std::string> candidates(known.begin(), known.end());
  std::vector<std::string> problems;
  for (const auto& key : section.keys()) {
    if (known.count(key)) continue;
    problems.push_back(section.where(key) + ": key not used by task [" + section.name() +
                       "]: not an input, target, node key or task option" +
                       did_you_mean(key, candidates));
  }
  return problems;
}

std::vector<std::string> unstored_segment_lengths(const TaskSpec& spec, const ConfigFile& database,
                                                  const std::vector<std::string>& segment_lengths,
                                                  bool dynamic_mixing) {
  std::vector<std::string> problems;
  const bool train = spec.role == TaskRole::kTrain;
  if (!train && !(spec.role == TaskRole::kValidation && spec.validation_segments == "stage"))
    return problems;
  const bool inputs_only = train && dynamic_mixing;
  for (const auto& set : spec.linked_sets) {
    std::vector<const std::vector<DataBinding>*> read = {&set.inputs};
    if (!inputs_only) read.push_back(&set.targets);
    for (const auto* bindings : read)
      for (const auto& binding : *bindings)
        for (const auto& name : binding.sections) {
          const ConfigSection* section = database.find_section(name);
          if (!section) continue;
          try {
            auto stored = read_database_section(*section, database);
            if (!stored.preprocess) continue;
            for (const auto& segment : segment_lengths)
              require_stored_segment_length(*section, stored, segment,
                                            "'" + binding.name + "' of " +
                                                (train ? "task " : "validation task ") +
                                                spec.name);
          } catch (const ConfigError& e) {
            problems.push_back(e.what());
          }
        }
  }
  return problems;
}

}  // namespace nabu
