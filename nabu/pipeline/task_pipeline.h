// Where a task's data become batches, for training, evaluation and the benchmarks alike: the
// stored examples of one linked set, optionally cut to a prefix, optionally replaced by new
// mixtures every epoch (dynamic mixing), batched by a BatchPlan and loaded in the background by an
// InputPipeline.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nabu/pipeline/batch_plan.h"
#include "nabu/pipeline/dynamic_mixing.h"
#include "nabu/pipeline/example_set.h"
#include "nabu/pipeline/input_pipeline.h"

namespace nabu {

class Recipe;

struct TaskPipelineOptions {
  std::string what;  // names the task in errors ("training task [x]")
  std::string segment_length = "full";  // the stores to read ("100", "full", ...)
  // Keep the first int(N * keep_fraction) stored examples (trainset_frac) ...
  double keep_fraction = 1.0;
  // ... and of those at most the whole batches within the first max_examples (an evaluator's
  // requested_utts; -1 = all).
  int64_t max_examples = -1;
  // New mixtures every epoch instead of the stored ones; as many per epoch as the stores keep
  // (so epochs and num_steps keep their meaning). Its segment_length and examples_per_epoch are
  // filled in here.
  std::optional<DynamicMixingOptions> mixing;
  BatchPlanOptions plan;
  bool cycle = false;  // training: epochs without end; evaluation: one pass
  int prefetch = 4;
  bool pin_memory = false;  // page-locked batches, for models on a GPU
};

class TaskPipeline {
 public:
  // No example left is not an error here: the caller checks stored_size() and names its key.
  TaskPipeline(const Recipe& recipe, const std::vector<DataBinding>& inputs,
               const std::vector<DataBinding>& targets, TaskPipelineOptions options,
               StoreCache& stores);

  // The examples kept from the stores (before any mixing), and how many keep_fraction left
  // before max_examples rounded them down to whole batches.
  int64_t stored_size() const { return stored_->size(); }
  int64_t available() const { return available_; }
  // What the batches are made of: the stored examples or the mixtures.
  const ExampleSource& examples() const { return *source_; }
  const DynamicMixtureSet* mixtures() const { return mixtures_.get(); }
  // A loader at `from` (a training checkpoint's position), or at the start.
  std::unique_ptr<InputPipeline> start(PipelinePosition from = {}) const;

 private:
  TaskPipelineOptions options_;
  std::shared_ptr<ExampleSet> stored_;
  std::shared_ptr<DynamicMixtureSet> mixtures_;
  std::shared_ptr<const ExampleSource> source_;
  int64_t available_ = 0;
};

}  // namespace nabu
