// Separation with a trained experiment: model outputs -> reconstructor masks -> signals. Shared by
// `nabu test` (over the test sets of test_evaluator.cfg) and `nabu separate` (new mixtures).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "nabu/core/recipe.h"
#include "nabu/neuralnetworks/evaluators/evaluator.h"
#include "nabu/neuralnetworks/models/model_bank.h"
#include "nabu/neuralnetworks/trainers/mixed_precision.h"
#include "nabu/pipeline/example_set.h"
#include "nabu/postprocessing/reconstructors/reconstructor.h"
#include "nabu/postprocessing/scorers/scorer.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/section_reader.h"

namespace nabu {

struct Separation {
  std::string utterance;
  torch::Tensor signals;  // [S, N] double, each normalised to max |x| = 1
  torch::Tensor masks;    // [S, T, F]
  int sample_rate = 0;
};

class Separator;

// Gains g [S] that make Σ_s g_s signals[s] closest to the mixture in the least-squares sense
// (signals [S, N], mixture [N], double): the level of the waveforms of a model trained on a
// scale-invariant loss, which `nabu separate` writes at the recording's level.
torch::Tensor mixture_gains(const torch::Tensor& signals, const torch::Tensor& mixture);

class TaskSeparation {
 public:
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
  friend class Separator;
  TaskSeparation(Separator& owner, const std::string& task);
  Separation reconstruct(const std::string& utterance, const TensorMap& outputs);

  // The model outputs come from the owner (evaluate_outputs, forward_samples); a task adds the
  // reconstruction.
  Separator& owner_;
  std::string name_;
  ReconstructorPtr reconstructor_;
  std::unique_ptr<SectionReader> mixture_, usedbins_;
};

// `model` names one update's export, "step<N>" (model/export/model_step<N>.pt).
bool is_step_model(const std::string& model);
// `model` names the mean of the exports of updates from..to, "avg<from>-<to>".
bool parse_averaged_steps(const std::string& model, int64_t& from, int64_t& to);
// `model` names a model of an experiment: final, avg, step<N> or avg<A>-<B>.
bool is_experiment_model(const std::string& model);
// What an experiment's --model may be, for errors: "final (model.pt), avg (...), ...".
std::string experiment_model_choices();

class Separator {
 public:
  // The model of stage `segment`: <expdir>/<segment>/model/model.pt (`model` = "final") or
  // model_avg.pt ("avg", average_checkpoints), or "step<N>" the export of update N
  // (export_every) of the latest stage that has one, or "avg<A>-<B>" the mean of that stage's
  // exports of updates A to B, or with `early` the latest validated checkpoint of the training.
  // The models compute on `device`.
  Separator(const Recipe& recipe, const std::filesystem::path& expdir, const std::string& segment,
            bool early, const std::string& model = "final",
            const c10::Device& device = c10::kCPU);
  std::unique_ptr<TaskSeparation> task(const std::string& name);
  const Recipe& recipe() const { return recipe_; }
  // The test loss of a task that is not separated (recognition), handing the model outputs of
  // every utterance (real frames only; up to max_utterances, -1 = all) to `on_utterance`.
  using OutputsCallback = std::function<void(const std::string& utterance, const TensorMap&)>;
  EvaluationResult evaluate_outputs(const std::string& task, int64_t max_utterances,
                                    const OutputsCallback& on_utterance);
  // The outputs of a task's graph for one signal in memory (int16 scale, at sample_rate): its
  // inputs computed by their sections' processors (`nabu recognize`). [T, ...] per output.
  TensorMap forward_samples(const std::string& task, const torch::Tensor& samples,
                            int sample_rate);
  // The sample rate of the data a task's model was trained on (its first input section's list);
  // 0 for a task without inputs.
  int input_sample_rate(const std::string& task);
  // A task's graph with its models built and loaded (by one forward pass on a short tone at
  // `sample_rate`), and its input sections (`nabu export`).
  const ModelGraph& loaded_graph(const std::string& task, int sample_rate);
  std::vector<const SectionReader*> input_sections(const std::string& task);
  // forward_samples computes in `precision` (autocast; `nabu separate --precision`); fp32 by
  // default. The outputs come back as float32 either way.
  void set_precision(Precision precision) { precision_ = precision; }
  // The training's warnings about the final model (core/training_summary.h): a model that never
  // improved on its start. Logged when the Separator is made; empty for other models.
  const std::vector<std::string>& training_warnings() const { return training_warnings_; }

 private:
  friend class TaskSeparation;
  // Builds the models of `graph` on the CPU with one forward pass on `inputs` (ModelBank::to),
  // loads their parameters from the model file and moves the bank to device_.
  void build_and_load(const ModelGraph& graph, const TensorMap& inputs,
                      const std::map<std::string, torch::Tensor>& lengths);
  const Recipe& recipe_;
  std::string segment_;
  std::filesystem::path model_file_;
  std::vector<std::filesystem::path> average_files_;  // avg<A>-<B>: the exports averaged
  bool early_ = false;  // model_file_ is a training checkpoint
  std::vector<std::string> training_warnings_;
  std::unique_ptr<ModelBank> bank_;
  c10::Device device_;  // where the models compute; the outputs come back to the CPU
  Precision precision_ = Precision::kFp32;
  StoreCache stores_;
  // forward_samples: per task, its graph (loaded on first use) and its input sections.
  struct SampleTask {
    std::unique_ptr<ModelGraph> graph;
    std::vector<std::pair<std::string, std::unique_ptr<SectionReader>>> inputs;
    bool loaded = false;
  };
  SampleTask& sample_task(const std::string& task);
  std::map<std::string, SampleTask> sample_tasks_;
};

}  // namespace nabu
