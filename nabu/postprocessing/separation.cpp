#include "nabu/postprocessing/separation.h"

#include <algorithm>

#include <spdlog/spdlog.h>

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

Separator::Separator(const Recipe& recipe, const fs::path& expdir, const std::string& segment,
                     bool early, const std::string& model, const c10::Device& device)
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
    spdlog::info("model: the mean of {} exports, {} to {}", average_files_.size(),
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
  if (!averaged) spdlog::info("model: {}", model_file_.string());
  // The final model of a training that never improved on its start (nabu train said so at its
  // end) is said again wherever it is used: what it gives is no measurement of training.
  if (model == "final" && !early)
    training_warnings_ = read_training_summary(expdir).final_model_warnings();
  for (const auto& warning : training_warnings_) spdlog::warn("{}", warning);
  bank_ = std::make_unique<ModelBank>(recipe.get("model.cfg"));
}

void Separator::build_and_load(const ModelGraph& graph, const TensorMap& inputs,
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

std::unique_ptr<TaskSeparation> Separator::task(const std::string& name) {
  return std::unique_ptr<TaskSeparation>(new TaskSeparation(*this, name));
}

EvaluationResult Separator::evaluate_outputs(const std::string& task, int64_t max_utterances,
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

Separator::SampleTask& Separator::sample_task(const std::string& task) {
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

int Separator::input_sample_rate(const std::string& task) {
  auto& entry = sample_task(task);
  return entry.inputs.empty() ? 0 : entry.inputs.front().second->list_sample_rate();
}

TensorMap Separator::forward_samples(const std::string& task, const torch::Tensor& samples,
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

const ModelGraph& Separator::loaded_graph(const std::string& task, int sample_rate) {
  auto& entry = sample_task(task);
  if (!entry.loaded) {
    auto time = torch::arange(sample_rate / 2, torch::kFloat64) / sample_rate;
    forward_samples(task, 3000.0 * torch::sin(2.0 * M_PI * 440.0 * time), sample_rate);
  }
  return *entry.graph;
}

std::vector<const SectionReader*> Separator::input_sections(const std::string& task) {
  std::vector<const SectionReader*> sections;
  for (const auto& [name, reader] : sample_task(task).inputs) sections.push_back(reader.get());
  return sections;
}

TaskSeparation::TaskSeparation(Separator& owner, const std::string& task)
    : owner_(owner), name_(task) {
  const Recipe& recipe = owner.recipe_;
  const ConfigFile& reconstructors = recipe.get("reconstructor.cfg");
  const ConfigSection* reconstructor_section = reconstructors.find_section(task);
  if (!reconstructor_section)
    throw ConfigError(reconstructors.path() + ": no section [" + task + "] for test task " + task);
  reconstructor_ = make_reconstructor(*reconstructor_section);
  mixture_ = std::make_unique<SectionReader>(recipe, reconstructor_->org_mix_section());
  if (!reconstructor_->estimates_signals() &&
      (!mixture_->feature_options() || mixture_->feature_options()->feature != "spec"))
    reconstructor_section->fail("org_mix", "section [" + reconstructor_->org_mix_section() +
                                               "] must give the complex spectrum (feature = spec)");
  if (!mixture_->feature_options())
    reconstructor_section->fail("org_mix", "section [" + reconstructor_->org_mix_section() +
                                               "] must read audio (a processor with a feature)");
  if (reconstructor_->needs_usedbins())
    usedbins_ = std::make_unique<SectionReader>(recipe, reconstructor_->usedbins_section());
}

Separation TaskSeparation::reconstruct(const std::string& utterance, const TensorMap& outputs) {
  Separation separation;
  separation.utterance = utterance;
  auto spectrum = mixture_->read(utterance, &separation.sample_rate);
  if (reconstructor_->estimates_signals()) {
    separation.signals = reconstructor_->signals(outputs, /*normalise=*/true);
    return separation;
  }
  torch::Tensor usedbins;
  if (usedbins_) usedbins = usedbins_->read(utterance);
  separation.masks = reconstructor_->masks(outputs, usedbins);
  const FeatureOptions& features = *mixture_->feature_options();
  FrameSettings settings = features.frames(separation.sample_rate);
  // The snipped signal.
  int64_t length = frames_span(spectrum.size(0), settings);
  separation.signals = masks_to_signals(separation.masks, spectrum, settings, length);
  return separation;
}

EvaluationResult TaskSeparation::evaluate(int64_t max_utterances, const Callback& on_separation) {
  return owner_.evaluate_outputs(
      name_, max_utterances, [&](const std::string& utterance, const TensorMap& outputs) {
        on_separation(reconstruct(utterance, outputs));
      });
}

torch::Tensor TaskSeparation::separate_samples(const torch::Tensor& samples, int sample_rate) {
  auto one = owner_.forward_samples(name_, samples, sample_rate);
  if (reconstructor_->estimates_signals()) {
    // A model trained on a scale-invariant loss gives its waveforms at any level (and sign):
    // each gets the gain that makes their sum closest to the mixture (least squares).
    auto signals = reconstructor_->signals(one, /*normalise=*/false);
    auto heard = samples.slice(0, 0, std::min(samples.size(0), signals.size(1)))
                     .to(torch::kFloat64);
    signals = signals.slice(1, 0, heard.size(0));
    return signals * mixture_gains(signals, heard).unsqueeze(1);
  }
  auto spectrum = mixture_->process_audio(samples, sample_rate);
  torch::Tensor usedbins;
  if (usedbins_) usedbins = usedbins_->process_audio(samples, sample_rate);
  auto masks = reconstructor_->masks(one, usedbins);
  FrameSettings settings = mixture_->feature_options()->frames(sample_rate);
  int64_t length = frames_span(spectrum.size(0), settings);
  return masks_to_signals(masks, spectrum, settings, length, /*normalise=*/false);
}

torch::Tensor mixture_gains(const torch::Tensor& signals, const torch::Tensor& mixture) {
  auto gram = torch::matmul(signals, signals.t());               // [S, S]
  auto projection = torch::matmul(signals, mixture.unsqueeze(1));  // [S, 1]
  // A silent or duplicated estimate makes the system singular: a ridge of 1e-9 of the mean
  // energy keeps it solvable and leaves well-posed gains unchanged.
  double ridge = 1e-9 * std::max(gram.diagonal().mean().item<double>(), 1e-12);
  auto eye = torch::eye(gram.size(0), gram.options());
  return torch::linalg_solve(gram + ridge * eye, projection).squeeze(1);
}

Model& TaskSeparation::waveform_model(const std::string& purpose) {
  const std::string& task = name_;
  if (!reconstructor().estimates_signals())
    throw Error("task " + task + ": reconstruct_type " + reconstructor().type() +
                " builds masks on the STFT; " + purpose +
                " takes the models that estimate waveforms (conv_tasnet, dprnn)");
  const auto inputs = owner_.input_sections(task);
  const FeatureOptions* features = inputs.size() == 1 ? inputs[0]->feature_options() : nullptr;
  if (!features || features->feature != "raw")
    throw Error("task " + task + ": " + purpose + " takes one input, the mixture waveform (feature = raw)");
  const ConfigSection& section = owner_.recipe().get("database.conf").section(inputs[0]->section());
  if (const ConfigFile* processor = owner_.recipe().find(section.get_string("processor_config", "")))
    if (processor->section("processor").get_string("mvn_type", "none") != "none")
      throw Error("task " + task + ": its waveform input is mean/variance normalised (" +
                  processor->path() + ": mvn_type), which " + purpose + " does not compute");
  const ModelGraph& graph = owner_.loaded_graph(task, model_sample_rate());
  if (graph.nodes().size() != 1)
    throw Error("task " + task + ": its graph has " + std::to_string(graph.nodes().size()) +
                " nodes; " + purpose + " takes one model applied to the mixture waveform");
  return graph.bank().at(graph.nodes().front().model);
}


int TaskSeparation::model_sample_rate() const {
  int rate = owner_.input_sample_rate(name_);
  return rate != 0 ? rate : mixture_->list_sample_rate();
}

DataLine TaskSeparation::mixture_line(const std::string& utterance) const {
  return mixture_->line(utterance);
}

int64_t TaskSeparation::frame_length(int sample_rate) const {
  return mixture_->feature_options()->frames(sample_rate).frame_length();
}

}  // namespace nabu
