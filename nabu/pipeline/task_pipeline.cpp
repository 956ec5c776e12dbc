#include "nabu/pipeline/task_pipeline.h"

#include "nabu/core/recipe.h"

namespace nabu {

TaskPipeline::TaskPipeline(const Recipe& recipe, const std::vector<DataBinding>& inputs,
                           const std::vector<DataBinding>& targets, TaskPipelineOptions options,
                           StoreCache& stores)
    : options_(std::move(options)) {
  // Under dynamic mixing the stores only count the examples of an epoch (the mixer computes
  // inputs and targets anew), and the inputs' stores count them: the waveform targets of a
  // spectrogram model need no store cut at its segment length, which counts frames.
  const std::vector<DataBinding> no_targets;
  stored_ = std::make_shared<ExampleSet>(inputs, options_.mixing ? no_targets : targets,
                                         recipe.get("database.conf"), options_.segment_length,
                                         stores, options_.what);
  stored_->truncate(static_cast<int64_t>(stored_->size() * options_.keep_fraction));
  available_ = stored_->size();
  if (options_.max_examples >= 0) {
    available_ = std::min<int64_t>(available_, options_.max_examples);
    stored_->truncate(available_ / options_.plan.batch_size * options_.plan.batch_size);
  }
  source_ = stored_;
  if (options_.mixing && stored_->size() > 0) {
    DynamicMixingOptions mixing = *options_.mixing;
    mixing.examples_per_epoch = stored_->size();
    mixing.segment_length = options_.segment_length;
    mixtures_ = std::make_shared<DynamicMixtureSet>(recipe, inputs, targets, mixing, options_.what);
    source_ = mixtures_;
  }
}

std::unique_ptr<InputPipeline> TaskPipeline::start(PipelinePosition from) const {
  return std::make_unique<InputPipeline>(source_, options_.plan, options_.cycle,
                                         options_.prefetch, from, options_.pin_memory);
}

}  // namespace nabu
