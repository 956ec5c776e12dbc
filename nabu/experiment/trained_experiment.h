// A trained experiment opened for use (docs/architecture.md, "experiment"): which model file
// (final, avg, step<N>, avg<A>-<B>, or the latest checkpoint), its graph built and loaded on a
// device, and the forward passes of its tasks over their test data or over a signal in memory.
// inference/task_separation.h turns a task's outputs into separated signals; `nabu test`,
// `separate`, `recognize`, `export` and the C++ API all open an experiment here.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "nabu/core/recipe.h"
#include "nabu/neuralnetworks/evaluators/evaluator.h"
#include "nabu/neuralnetworks/models/model_bank.h"
#include "nabu/neuralnetworks/kernels/mixed_precision.h"
#include "nabu/pipeline/example_set.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/section_reader.h"

namespace nabu {

// Which test task of an experiment a command separates with, and at which segment length: the
// one asked for (`task`, checked against test_evaluator.cfg) or its [evaluator] tasks' first,
// and its segment_length (default full). What `nabu separate`, `recognize`, `export`, `test`
// and the C++ API take when no task is named. Throws Error naming the file for a task that
// test_evaluator.cfg does not hold.
struct ExperimentTask {
  std::string task, segment;
};
ExperimentTask experiment_task(const Recipe& recipe, const std::string& task = "");
// Throws Error when `expdir` holds no trained experiment (no recipe copy), naming the folder.
void require_trained_experiment(const std::filesystem::path& expdir);

// `model` names one update's export, "step<N>" (model/export/model_step<N>.pt).
bool is_step_model(const std::string& model);
// `model` names the mean of the exports of updates from..to, "avg<from>-<to>".
bool parse_averaged_steps(const std::string& model, int64_t& from, int64_t& to);
// `model` names a model of an experiment: final, avg, step<N> or avg<A>-<B>.
bool is_experiment_model(const std::string& model);
// What an experiment's --model may be, for errors: "final (model.pt), avg (...), ...".
std::string experiment_model_choices();

class TrainedExperiment {
 public:
  // The model of stage `segment`: <expdir>/<segment>/model/model.pt (`model` = "final") or
  // model_avg.pt ("avg", average_checkpoints), or "step<N>" the export of update N
  // (export_every) of the latest stage that has one, or "avg<A>-<B>" the mean of that stage's
  // exports of updates A to B, or with `early` the latest validated checkpoint of the training.
  // The models compute on `device`.
  TrainedExperiment(const Recipe& recipe, const std::filesystem::path& expdir, const std::string& segment,
            bool early, const std::string& model = "final",
            const c10::Device& device = c10::kCPU);
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
  // improved on its start. Logged when the experiment is opened; empty for other models.
  const std::vector<std::string>& training_warnings() const { return training_warnings_; }

 private:
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
