#include "nabu/neuralnetworks/evaluators/task_loss_evaluator.h"

#include "nabu/core/error.h"
#include "nabu/pipeline/input_pipeline.h"

namespace nabu {

TensorMap model_inputs(const Batch& batch, const std::vector<std::string>& input_names) {
  TensorMap inputs;
  for (const auto& name : input_names) {
    const auto& tensor = batch.data.at(name);
    inputs[name] = tensor.is_floating_point() ? tensor : tensor.to(torch::kFloat32);
  }
  return inputs;
}

TensorMap batch_targets(const Batch& batch, const std::vector<std::string>& target_names) {
  TensorMap targets;
  for (const auto& name : target_names) targets[name] = batch.data.at(name);
  return targets;
}

TaskLossEvaluator::TaskLossEvaluator(const ConfigSection& section, TaskRole role,
                                     const ConfigSection* evaluator, const ConfigFile& database,
                                     const std::string& segment_length, ModelBank& bank,
                                     LossPtr loss, StoreCache& stores, int prefetch)
    : spec_(read_task_spec(section, role, evaluator)),
      graph_(std::make_unique<ModelGraph>(section, bank)), loss_(std::move(loss)),
      prefetch_(prefetch) {
  std::string what = (role == TaskRole::kTest ? "test task [" : "validation task [") +
                     spec_.name + "]";
  // SPEC §2.d: linked-set weights relative to the first one.
  double first_weight = spec_.linked_sets.front().weight;
  num_batches_ = -1;
  for (const auto& set : spec_.linked_sets) {
    auto examples = std::make_shared<ExampleSet>(set.inputs, set.targets, database, segment_length,
                                                 stores, what);
    // The first min(N, requested_utts) examples, a whole number of batches.
    int64_t usable = std::min<int64_t>(examples->size(), spec_.requested_utts);
    int64_t batches = usable / spec_.batch_size;
    if (batches == 0)
      section.fail("batch_size", "batch_size " + std::to_string(spec_.batch_size) +
                                     " is larger than the " + std::to_string(usable) +
                                     " examples available; lower it");
    examples->truncate(batches * spec_.batch_size);
    num_batches_ = num_batches_ < 0 ? batches : std::min(num_batches_, batches);
    sets_.push_back({set, set.weight / first_weight, examples});
  }
}

EvaluationResult TaskLossEvaluator::evaluate(int64_t max_batches, Communicator* communicator,
                                             const BatchCallback& on_batch) {
  torch::NoGradGuard no_grad;
  int64_t batches = max_batches < 0 ? num_batches_ : std::min(max_batches, num_batches_);
  int rank = communicator ? communicator->rank() : 0;
  int world = communicator ? communicator->world_size() : 1;
  EvaluationResult result;
  for (const auto& data : sets_) {
    BatchPlanOptions plan;
    plan.batch_size = spec_.batch_size;
    plan.shuffle = false;
    InputPipeline pipeline(data.examples, plan, /*cycle=*/false, prefetch_);
    for (int64_t b = 0; b < batches; ++b) {
      auto batch = pipeline.next();
      if (!batch) break;
      if (b % world != rank) continue;
      const auto& lengths = batch->lengths.at(spec_.input_names.front());
      auto outputs = graph_->forward(model_inputs(*batch, spec_.input_names), batch->lengths,
                                     /*training=*/false);
      auto loss = (*loss_)(batch_targets(*batch, spec_.target_names), outputs, lengths);
      result.loss += data.weight * loss.loss.item<double>();
      result.norm += data.weight * loss.norm.item<double>();
      result.batches += 1;
      result.examples += batch->size();
      if (on_batch) on_batch(*batch, outputs);
    }
  }
  if (communicator && world > 1) {
    auto sums = all_reduce_sum(*communicator,
                               {result.loss, result.norm, static_cast<double>(result.batches),
                                static_cast<double>(result.examples)});
    result.loss = sums[0];
    result.norm = sums[1];
    result.batches = static_cast<int64_t>(sums[2]);
    result.examples = static_cast<int64_t>(sums[3]);
  }
  return result;
}

}  // namespace nabu
