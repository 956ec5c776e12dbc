// Separation with a trained experiment's task: model outputs -> reconstructor masks -> signals.
// Shared by `nabu test` (over the test sets of test_evaluator.cfg), `nabu separate` (new
// mixtures), `nabu export` and the C++ API.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "nabu/experiment/trained_experiment.h"
#include "nabu/inference/reconstructors/reconstructor.h"

namespace nabu {

struct Separation {
  std::string utterance;
  torch::Tensor signals;  // [S, N] double, each normalised to max |x| = 1
  torch::Tensor masks;    // [S, T, F]
  int sample_rate = 0;
};

class TrainedExperiment;

// Gains g [S] that make Σ_s g_s signals[s] closest to the mixture in the least-squares sense
// (signals [S, N], mixture [N], double): the level of the waveforms of a model trained on a
// scale-invariant loss, which `nabu separate` writes at the recording's level.
torch::Tensor mixture_gains(const torch::Tensor& signals, const torch::Tensor& mixture);

class TaskSeparation {
 public:
  // Test task `task` of the opened experiment (its reconstructor.cfg section and the sections
  // the reconstructor reads). Throws ConfigError naming the file and section.
  TaskSeparation(TrainedExperiment& experiment, const std::string& task);
  using Callback = std::function<void(const Separation&)>;
  // Test loss over the task's test data; every utterance (up to max_utterances, -1 = all) is
  // separated and handed to `on_separation`.
  EvaluationResult evaluate(int64_t max_utterances, const Callback& on_separation);
  // Separates one signal in memory (int16 scale, at the model's rate): the task's inputs are
  // computed from it by their sections' processors, the masks applied to its spectrum. Returns
  // [S, N'] double at the mixture's scale (not normalised; N' = the snipped length: a whole
  // number of frame steps after one frame). Throws DataError when an input needs more than the
  // mixture.
  torch::Tensor separate_samples(const torch::Tensor& samples, int sample_rate);
  // The task's single model applied to the mixture waveform (feature = raw, no mvn) whose
  // outputs are the separated waveforms, built and loaded: what `nabu export` scripts and
  // `nabu separate --stream` streams. Throws Error naming why another graph is not taken
  // (`purpose` starts the reason: "export takes ...").
  Model& waveform_model(const std::string& purpose);
  // The sample rate of the data the model was trained on (the task's first input section).
  int model_sample_rate() const;
  // Samples of one analysis frame at `sample_rate` (shorter signals cannot be separated).
  int64_t frame_length(int sample_rate) const;
  int num_speakers() const { return reconstructor_->num_speakers(); }
  const Reconstructor& reconstructor() const { return *reconstructor_; }
  // The line of the reconstructor's org_mix section for a test utterance (its mixture audio).
  DataLine mixture_line(const std::string& utterance) const;
  // The reconstructor's org_mix section, whose processor gives the mixture's spectrum.
  const SectionReader& mixture_section() const { return *mixture_; }
  const std::string& name() const { return name_; }

 private:
    Separation reconstruct(const std::string& utterance, const TensorMap& outputs);

  // The model outputs come from the owner (evaluate_outputs, forward_samples); a task adds the
  // reconstruction.
  TrainedExperiment& owner_;
  std::string name_;
  ReconstructorPtr reconstructor_;
  std::unique_ptr<SectionReader> mixture_, usedbins_;
};

}  // namespace nabu
