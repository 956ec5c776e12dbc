#include "nabu/experiment/trained_experiment.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/error.h"
#include "nabu/core/experiment_layout.h"
#include "nabu/core/fs.h"
#include "nabu/core/training_summary.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/trainers/checkpoint.h"
#include "nabu/neuralnetworks/trainers/model_snapshots.h"
#include "nabu/neuralnetworks/trainers/trainer_options.h"
#include "nabu/processing/signal.h"

namespace nabu {

namespace {

bool is_number(const std::string& text) {
  return !text.empty() && text.size() < 10 &&
         text.find_first_not_of("0123456789") == std::string::npos;
}

// The exports of updates [from, to] of the latest stage that has any, in update order.
std::vector<fs::path> exports_between(const ExperimentLayout& layout,
                                      const std::vector<std::string>& stages, int64_t from,
                                      int64_t to) {
  std::vector<fs::path> found;
  for (const auto& name : stages) {
    const fs::path dir = layout.stage(name).export_dir();
    if (!fs::is_directory(dir)) continue;
    std::vector<std::pair<int64_t, fs::path>> steps;
    for (const auto& entry : fs::directory_iterator(dir)) {
      const std::string file = entry.path().filename().string();
      const std::string prefix = "model_step", suffix = ".pt";
      if (file.size() <= prefix.size() + suffix.size() || file.rfind(prefix, 0) != 0 ||
          file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      const std::string digits =
          file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
      if (!is_number(digits)) continue;
      const int64_t step = std::stoll(digits);
      if (step >= from && step <= to) steps.emplace_back(step, entry.path());
    }
    if (steps.empty()) continue;
    std::sort(steps.begin(), steps.end());
    found.clear();
    for (const auto& [step, path] : steps) found.push_back(path);
  }
  return found;
}

}  // namespace

ExperimentTask experiment_task(const Recipe& recipe, const std::string& task) {
  const ConfigFile& test_cfg = recipe.get("test_evaluator.cfg");
  const ConfigSection& evaluator = test_cfg.section("evaluator");
  ExperimentTask chosen{task.empty() ? evaluator.get_list("tasks").at(0) : task,
                        evaluator.get_string("segment_length", "full")};
  if (chosen.task == "evaluator" || !test_cfg.has_section(chosen.task))
    throw Error("task " + chosen.task + ": not a task of " + test_cfg.path());
  return chosen;
}

void require_trained_experiment(const fs::path& expdir) {
  if (!fs::exists(expdir / "trainer.cfg"))
    throw Error(expdir.string() + " holds no trained experiment (no recipe copy)");
}

bool is_step_model(const std::string& model) {
  return model.size() > 4 && model.compare(0, 4, "step") == 0 && is_number(model.substr(4));
}

bool is_experiment_model(const std::string& model) {
  int64_t from = 0, to = 0;
  return model == "final" || model == "avg" || is_step_model(model) ||
         parse_averaged_steps(model, from, to);
}

std::string experiment_model_choices() {
  return "final (model.pt), avg (model_avg.pt), step<N> (model/export/model_step<N>.pt) or "
         "avg<A>-<B> (the mean of the exports of updates A to B)";
}

bool parse_averaged_steps(const std::string& model, int64_t& from, int64_t& to) {
  const auto dash = model.find('-');
  if (model.compare(0, 3, "avg") != 0 || dash == std::string::npos) return false;
  const std::string first = model.substr(3, dash - 3), last = model.substr(dash + 1);
  if (!is_number(first) || !is_number(last)) return false;
  from = std::stoll(first);
  to = std::stoll(last);
  return true;
}

TrainedExperiment::TrainedExperiment(const Recipe& recipe, const fs::path& expdir,
                                     const std::string& segment,
                                     bool early, const std::string& model,
                                     const c10::Device& device)
    : recipe_(recipe), segment_(segment), early_(early), device_(device) {
  const bool step = is_step_model(model);
  int64_t from = 0, to = 0;
  const bool averaged = parse_averaged_steps(model, from, to);
  if (!is_experiment_model(model))
    throw Error("--model=" + model + ": expected " + experiment_model_choices());
  if (averaged && from >= to)
    throw Error("--model=" + model + ": the first update must be below the last");
  if (model != "final" && early)
    throw Error("--model=" + model + " and --allow-early-testing exclude each other: "
                "--allow-early-testing takes the latest validated model");
  const ExperimentLayout layout{expdir};
  const StageLayout stage = layout.stage(segment);
  // The test stores stay the ones the experiment's first test read (and the training's, its).
  stores_.bind(std::make_shared<StoreRecord>(layout.stores_record(), expdir.string(), true));
  model_file_ = model == "avg" ? stage.average_model() : stage.model();
  if (model == "avg" && !fs::exists(model_file_))
    throw Error(model_file_.string() + " does not exist: train with average_checkpoints = N in "
                "trainer.cfg [trainer] to have the average of the N best validated models");
  // Exports (trainer.cfg export_every) of the latest stage that has one in the range: steps
  // count from each stage's start.
  if (step) from = to = std::stoll(model.substr(4));
  const std::vector<fs::path> exports =
      step || averaged
          ? exports_between(layout, read_trainer_options(recipe.get("trainer.cfg")).segment_lengths,
                            from, to)
          : std::vector<fs::path>{};
  if (step) {
    if (exports.empty())
      throw Error("--model=" + model + ": no stage of " + expdir.string() + " has model/export/" +
                  "model_" + model + ".pt (trainer.cfg export_every = N exports the model every N "
                  "updates)");
    model_file_ = exports.front();
  }
  if (averaged) {
    // Weight averaging along the trajectory: it smooths the swings between neighbouring
    // updates' models (docs/results.md, "Validating on recorded speakers, and how much one
    // checkpoint says").
    average_files_ = exports;
    if (average_files_.size() < 2)
      throw Error("--model=" + model + ": " + expdir.string() + " has " +
                  std::to_string(average_files_.size()) + " export(s) of updates " +
                  std::to_string(from) + " to " + std::to_string(to) +
                  " in one stage; averaging needs 2 or more (trainer.cfg export_every = N "
                  "exports the model every N updates)");
    model_file_ = average_files_.front();
    logger().info("model: the mean of {} exports, {} to {}", average_files_.size(),
                 average_files_.front().string(), average_files_.back().filename().string());
  } else if (early) {
    // The latest stage with a validated checkpoint.
    auto stages = read_trainer_options(recipe.get("trainer.cfg")).segment_lengths;
    model_file_.clear();
    for (const auto& stage : stages)
      if (fs::exists(layout.stage(stage).validated())) model_file_ = layout.stage(stage).validated();
    if (model_file_.empty())
      throw Error(expdir.string() + ": no validated checkpoint yet (no validation has run)");
  } else if (!fs::exists(model_file_)) {
    throw Error(model_file_.string() + " does not exist: train first (nabu train), or test a "
                "running training with --allow-early-testing");
  }
  if (!averaged) logger().info("model: {}", model_file_.string());
  // The final model of a training that never improved on its start (nabu train said so at its
  // end) is said again wherever it is used: what it gives is no measurement of training.
  if (model == "final" && !early)
    training_warnings_ = read_training_summary(expdir).final_model_warnings();
  for (const auto& warning : training_warnings_) logger().warn("{}", warning);
  bank_ = std::make_unique<ModelBank>(recipe.get("model.cfg"));
}

void TrainedExperiment::build_and_load(const ModelGraph& graph, const TensorMap& inputs,
                               const std::map<std::string, torch::Tensor>& lengths) {
  bank_->to(torch::kCPU);
  graph.materialize(inputs, lengths);
  const std::set<std::string> models = graph.used_models();
  // A training checkpoint (--allow-early-testing) or a model file.
  ParameterLoadReport report =
      !average_files_.empty() ? bank_->load_tensors(average_parameter_files(average_files_))
      : early_                ? bank_->load_tensors(load_checkpoint(model_file_, {}).parameters)
                              : bank_->load(model_file_);
  // Every parameter of the models this task uses must come from the file.
  for (const auto& name : report.missing) {
    if (!models.count(name.substr(0, name.find('.')))) continue;
    throw Error(model_file_.string() + " has no parameter " + name +
                " (was model.cfg changed after training?)");
  }
  for (const auto& [name, reason] : report.skipped)
    if (models.count(name.substr(0, name.find('.'))))
      throw Error(model_file_.string() + ": parameter " + name + " not loaded: " + reason +
                  " (was model.cfg changed after training?)");
  bank_->to(device_);
}

EvaluationResult TrainedExperiment::evaluate_outputs(const std::string& task, int64_t max_utterances,
                                             const OutputsCallback& on_utterance) {
  const ConfigFile& test_cfg = recipe_.get("test_evaluator.cfg");
  const ConfigSection& section = test_cfg.section(task);
  auto evaluator = make_evaluator(EvaluatorContext{
      section, TaskRole::kTest, test_cfg.find_section("evaluator"), recipe_,
      segment_, *bank_, make_loss(section, recipe_.find("loss.cfg")), stores_, 2});
  const auto& spec = evaluator->spec();
  {
    // The weights, loaded before the evaluator's first forward pass.
    torch::NoGradGuard no_grad;
    ExampleSet examples(spec.linked_sets.front().inputs, spec.linked_sets.front().targets,
                        recipe_.get("database.conf"), segment_, stores_,
                        "test task [" + task + "]");
    Batch first = examples.load({0});
    build_and_load(evaluator->graph(), model_inputs(first, spec.input_names), first.lengths);
  }
  int64_t done = 0;
  return evaluator->evaluate(-1, nullptr, [&](const Batch& batch, const TensorMap& outputs) {
    const auto& lengths = batch.lengths.at(spec.input_names.front());
    for (int64_t b = 0; b < batch.size(); ++b) {
      if (max_utterances >= 0 && done >= max_utterances) return;
      TensorMap utterance_outputs;
      for (const auto& [output_name, tensor] : outputs)
        utterance_outputs[output_name] =
            tensor[b].slice(0, 0, std::min(lengths[b].item<int64_t>(), tensor.size(1))).cpu();
      on_utterance(batch.names[b], utterance_outputs);
      ++done;
    }
  });
}

TrainedExperiment::SampleTask& TrainedExperiment::sample_task(const std::string& task) {
  auto found = sample_tasks_.find(task);
  if (found != sample_tasks_.end()) return found->second;
  const ConfigFile& test_cfg = recipe_.get("test_evaluator.cfg");
  const ConfigSection& section = test_cfg.section(task);
  SampleTask entry;
  entry.graph = std::make_unique<ModelGraph>(section, *bank_);
  auto spec = read_task_spec(section, TaskRole::kTest, test_cfg.find_section("evaluator"));
  for (const auto& binding : spec.linked_sets.front().inputs)
    entry.inputs.emplace_back(binding.name,
                              std::make_unique<SectionReader>(recipe_, binding.sections.front()));
  return sample_tasks_.emplace(task, std::move(entry)).first->second;
}

int TrainedExperiment::input_sample_rate(const std::string& task) {
  auto& entry = sample_task(task);
  return entry.inputs.empty() ? 0 : entry.inputs.front().second->list_sample_rate();
}

TensorMap TrainedExperiment::forward_samples(const std::string& task, const torch::Tensor& samples,
                                     int sample_rate) {
  auto& entry = sample_task(task);
  TensorMap inputs;
  std::map<std::string, torch::Tensor> lengths;
  for (const auto& [name, reader] : entry.inputs) {
    torch::Tensor data = reader->process_audio(samples, sample_rate);
    inputs[name] = data.to(torch::kFloat32).unsqueeze(0);
    lengths[name] = torch::tensor({data.size(0)}, torch::kLong);
  }
  torch::NoGradGuard no_grad;
  if (!entry.loaded) {
    build_and_load(*entry.graph, inputs, lengths);
    entry.loaded = true;
  }
  for (auto* tensors : {&inputs, &lengths})
    for (auto& [name, tensor] : *tensors) tensor = tensor.to(device_);
  TensorMap outputs;
  {
    AutocastScope autocast(precision_, device_);
    outputs = entry.graph->forward(inputs, lengths, /*training=*/false);
  }
  TensorMap one;
  for (const auto& [name, tensor] : outputs) {
    auto output = tensor[0].cpu();
    one[name] = output.is_floating_point() ? output.to(torch::kFloat32) : output;
  }
  return one;
}

const ModelGraph& TrainedExperiment::loaded_graph(const std::string& task, int sample_rate) {
  auto& entry = sample_task(task);
  if (!entry.loaded) {
    auto time = torch::arange(sample_rate / 2, torch::kFloat64) / sample_rate;
    forward_samples(task, 3000.0 * torch::sin(2.0 * M_PI * 440.0 * time), sample_rate);
  }
  return *entry.graph;
}

std::vector<const SectionReader*> TrainedExperiment::input_sections(const std::string& task) {
  std::vector<const SectionReader*> sections;
  for (const auto& [name, reader] : sample_task(task).inputs) sections.push_back(reader.get());
  return sections;
}

}  // namespace nabu
