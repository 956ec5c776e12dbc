#include "nabu/neuralnetworks/trainers/task_gradients.h"

#include <ATen/record_function.h>

#include <optional>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/clock.h"
#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/pipeline/task_pipeline.h"

namespace nabu {

TaskGradients::TaskGradients(const ConfigSection& section, const ConfigFile* loss_cfg,
                         const Recipe& recipe, const DataOptions& data,
                         const StageSettings& stage, ModelBank& bank, StoreCache& stores, int rank,
                         int world_size, uint64_t seed, bool pin_memory)
    : spec_(read_task_spec(section, TaskRole::kTrain)),
      graph_(std::make_unique<ModelGraph>(section, bank)), loss_(make_loss(section, loss_cfg)) {
  for (const LinkedSet& set : spec_.linked_sets) {
    TaskPipelineOptions options;
    options.what = "training task [" + spec_.name + "]";
    options.segment_length = stage.segment_length;
    // trainset_frac keeps the first int(N * frac) examples (docs/trainer.md).
    options.keep_fraction = spec_.trainset_frac;
    if (data.dynamic_mixing) {
      DynamicMixingOptions mixing = data.mixing;  // trainer.cfg's, whole
      mixing.seed =
          seed * 1000003ULL + stable_hash("dynamic mixing/" + spec_.name + "/" + set.name);
      options.mixing = mixing;
    }
    options.plan.batch_size = stage.batch_size;
    options.plan.numbuckets = data.numbuckets;
    options.plan.shuffle = data.shuffle;
    // Each task and linked set gets its own stream of the run's seed.
    options.plan.seed = seed * 1000003ULL + stable_hash(spec_.name + "/" + set.name);
    options.plan.rank = rank;
    options.plan.world_size = world_size;
    options.cycle = true;
    options.prefetch = data.prefetch;
    options.pin_memory = pin_memory;
    TaskPipeline pipeline(recipe, set.inputs, set.targets, options, stores);
    if (pipeline.available() > 0 && pipeline.stored_size() == 0)
      recipe.get("trainer.cfg").section("trainer").fail(
          "batch_size", "batch_size " + std::to_string(stage.batch_size) + " of stage " +
                            stage.segment_length + " is larger than the " +
                            std::to_string(pipeline.available()) + " training examples of task [" +
                            spec_.name + "]; lower it");
    if (pipeline.stored_size() == 0) section.fail("trainset_frac", "leaves no training example");
    num_examples_ = pipeline.stored_size();  // the last linked set wins, as in the original
    if (const auto* mixtures = pipeline.mixtures(); mixtures && rank == 0)
      logger().info("task {}: dynamic mixing: {} new mixtures per epoch, {} sources each, from {} "
                   "utterances of {} speakers",
                   spec_.name, mixtures->size(), mixtures->num_sources(),
                   mixtures->pool().sources().size(), mixtures->pool().num_speakers());
    pipelines_.push_back({set, pipeline.start()});
  }
}

void TaskGradients::materialize() {
  torch::NoGradGuard no_grad;
  const auto& examples = pipelines_.front().pipeline->examples();
  Batch batch = examples.load(0, {0});
  graph_->materialize(model_inputs(batch, spec_.input_names), batch.lengths);
  parameters_ = graph_->parameters();
  gradients_.assign(parameters_.size(), torch::Tensor());
}

void TaskGradients::exclude(const std::vector<torch::Tensor>& excluded) {
  std::vector<torch::Tensor> kept;
  for (const auto& parameter : parameters_) {
    bool drop = false;
    for (const auto& other : excluded)
      drop = drop || parameter.unsafeGetTensorImpl() == other.unsafeGetTensorImpl();
    if (!drop) kept.push_back(parameter);
  }
  parameters_ = kept;
  gradients_.assign(parameters_.size(), torch::Tensor());
}

void TaskGradients::reset_accumulators() {
  for (auto& gradient : gradients_) gradient = torch::Tensor();
  loss_sum_ = norm_sum_ = 0;
  examples_ = frames_ = 0;
  times_ = PhaseTimes{};
}

namespace {

// Autograd may hand two parameters one gradient tensor (both terms of a sum of parameters, as a
// layer's two biases), and the accumulation and the update change gradients in place: each
// parameter must own its gradient.
torch::Tensor owned_gradient(const std::vector<torch::Tensor>& gradients, std::size_t i) {
  for (std::size_t j = 0; j < i; ++j)
    if (gradients[j].defined() && gradients[i].is_alias_of(gradients[j]))
      return gradients[i].clone();
  return gradients[i];
}

}  // namespace

void TaskGradients::run_minibatch(double loss_scale) {
  const torch::Device& device = graph_->bank().device();
  for (auto& [set, pipeline] : pipelines_) {
    auto start = Clock::now();
    std::optional<Batch> batch;
    {
      RECORD_USER_SCOPE("nabu::data_wait");
      batch = pipeline->next();
    }
    if (!batch) throw Error("training data of task " + spec_.name + " ended unexpectedly");
    batch = on_device(std::move(*batch), device);
    times_.data += seconds_since(start);
    start = Clock::now();
    torch::Tensor loss;
    {
      RECORD_USER_SCOPE("nabu::forward");
      TensorMap outputs;
      {
        AutocastScope autocast(precision_, device);
        outputs = graph_->forward(model_inputs(*batch, spec_.input_names), batch->lengths,
                                  /*training=*/true);
      }
      // The losses compute in fp32 (their sums over frames and speakers lose too much in 16 bits).
      if (precision_ != Precision::kFp32)
        for (auto& [name, output] : outputs)
          if (output.is_floating_point()) output = output.to(torch::kFloat32);
      auto result =
          batch_loss(*loss_, *batch, spec_.input_names.front(), spec_.target_names, outputs);
      loss = result.loss * set.weight;
      loss_sum_ += loss.item<double>();
      norm_sum_ += result.norm.item<double>() * set.weight;
    }
    times_.forward += seconds_since(start);
    examples_ += batch->size();
    frames_ += batch->real_frames;
    if (parameters_.empty()) continue;
    start = Clock::now();
    RECORD_USER_SCOPE("nabu::backward");
    auto gradients = torch::autograd::grad({loss_scale != 1.0 ? loss * loss_scale : loss},
                                           parameters_, /*grad_outputs=*/{},
                                           /*retain_graph=*/false, /*create_graph=*/false,
                                           /*allow_unused=*/true);
    for (std::size_t i = 0; i < gradients.size(); ++i) {
      if (!gradients[i].defined()) continue;
      if (minibatch_clip_ > 0) {
        // The gradients are of loss_scale x loss: the bound scales with them.
        const double bound = minibatch_clip_ * loss_scale;
        gradients[i] = gradients[i].clamp(-bound, bound);
      }
      if (gradients_[i].defined()) gradients_[i].add_(gradients[i]);
      else gradients_[i] = owned_gradient(gradients, i);
    }
    times_.backward += seconds_since(start);
  }
}

std::map<std::string, PipelinePosition> TaskGradients::positions() const {
  std::map<std::string, PipelinePosition> out;
  for (const auto& entry : pipelines_)
    out[spec_.name + "/" + entry.set.name] = entry.pipeline->position();
  return out;
}

void TaskGradients::seek(const std::map<std::string, PipelinePosition>& positions) {
  for (auto& entry : pipelines_) {
    auto it = positions.find(spec_.name + "/" + entry.set.name);
    if (it != positions.end()) entry.pipeline->seek(it->second);
  }
}

}  // namespace nabu
