#include "nabu/inference/task_separation.h"

#include "nabu/core/error.h"
#include "nabu/processing/signal.h"

namespace nabu {

TaskSeparation::TaskSeparation(TrainedExperiment& owner, const std::string& task)
    : owner_(owner), name_(task) {
  const Recipe& recipe = owner.recipe();
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
