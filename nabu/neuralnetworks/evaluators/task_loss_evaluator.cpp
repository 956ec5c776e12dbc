#include "nabu/neuralnetworks/evaluators/task_loss_evaluator.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/error.h"
#include "nabu/core/strings.h"

namespace nabu {

EvaluatorRegistry& evaluator_registry() {
  static EvaluatorRegistry registry("evaluator");
  return registry;
}

std::string evaluator_type(const ConfigSection& section, const ConfigSection* evaluator) {
  const ConfigSection* source = &section;
  std::string type = section.get_string("evaluator", "");
  std::string metric = section.get_string("validation_metric", "");
  if (metric.empty() && evaluator) metric = evaluator->get_string("validation_metric", "");
  if (type.empty() && !metric.empty() && metric != "loss") type = "metric_evaluator";
  if (type.empty() && evaluator) {
    type = evaluator->get_string("evaluator", "");
    source = evaluator;
    if (type == "multi_task") type.clear();  // the test evaluator: one evaluator per task
  }
  if (type.empty()) return "task_loss_evaluator";
  if (!evaluator_registry().contains(type))
    source->fail("evaluator", evaluator_registry().unknown_message(type));
  return type;
}

const std::vector<std::string>& validation_metrics() {
  static const std::vector<std::string> metrics{"loss",  "sdr",   "si_sdr",
                                                "stoi",  "estoi", "pesq",
                                                "error_rate"};
  return metrics;
}

std::string validation_metric_of(const ConfigSection& section, const ConfigSection* evaluator) {
  const ConfigSection& source =
      section.has("validation_metric") || !evaluator ? section : *evaluator;
  const std::string metric = source.get_string("validation_metric", "loss");
  const auto& known = validation_metrics();
  if (std::find(known.begin(), known.end(), metric) == known.end())
    source.fail("validation_metric", "'" + metric + "' is not one of " + join(known, ", "));
  return metric;
}

std::vector<std::string> validated_tasks(const ConfigSection& evaluator,
                                         const std::vector<std::string>& training_tasks) {
  if (evaluator.get_string("evaluator", "") == "None") return {};
  auto excluded = evaluator.get_list("tasks_excluded_for_val", {});
  std::vector<std::string> tasks;
  for (const auto& task : training_tasks)
    if (std::find(excluded.begin(), excluded.end(), task) == excluded.end()) tasks.push_back(task);
  return tasks;
}

EvaluatorPtr make_evaluator(const EvaluatorContext& context) {
  return evaluator_registry().create(evaluator_type(context.section, context.evaluator), context);
}

namespace {

struct TaskLossEvaluatorOptions {
  int requested_utts = 0, batch_size = 0;
  std::string validation_segments = "stage";
  void declare(OptionsReader& r) {
    r("requested_utts", requested_utts,
      "examples evaluated at most (the first ones, a whole number of batches); in the task "
      "section or in [evaluator]");
    r("batch_size", batch_size, "examples per batch; in the task section or in [evaluator]");
    r("validation_segments", validation_segments,
      "validation only: the stores read in a segmented stage, the stage's (stage) or whole "
      "utterances (full, e.g. for waveform targets of a spectrogram model); in the task section "
      "or in [evaluator]");
  }
};

}  // namespace

NABU_REGISTER_DOCUMENTED(evaluator_registry, "task_loss_evaluator",
                         [](const EvaluatorContext& context) -> EvaluatorPtr {
                           if (context.section.get_int("tensorboard_audio", 0) > 0)
                             context.section.fail(
                                 "tensorboard_audio",
                                 "the task validates by its loss, which separates no signals; "
                                 "set validation_metric = sdr, si_sdr, stoi, estoi or pesq");
                           return std::make_unique<TaskLossEvaluator>(context);
                         },
                         TaskLossEvaluatorOptions,
                         "the task's loss over its first requested_utts examples, training off");

namespace {

// Where a task's batch_size is set: its own section, else its [evaluator] section.
std::string batch_size_origin(const ConfigSection& section, const ConfigSection* evaluator) {
  if (section.has("batch_size") || !evaluator) return section.where("batch_size");
  return evaluator->where("batch_size");
}

}  // namespace

TaskLossEvaluator::TaskLossEvaluator(const EvaluatorContext& context)
    : spec_(read_task_spec(context.section, context.role, context.evaluator)),
      graph_(std::make_unique<ModelGraph>(context.section, context.bank)), loss_(context.loss),
      prefetch_(context.prefetch) {
  const ConfigSection& section = context.section;
  std::string what = (context.role == TaskRole::kTest ? "test task [" : "validation task [") +
                     spec_.name + "]";
  // Linked-set weights are relative to the first one (docs/trainer.md).
  double first_weight = spec_.linked_sets.front().weight;
  // A set smaller than one batch is evaluated in one batch of all its examples (one info line),
  // the batch size then being the smallest set's.
  for (bool shrunk = false;; shrunk = true) {
    num_batches_ = -1;
    sets_.clear();
    int64_t smallest = -1;
    for (const auto& set : spec_.linked_sets) {
      // The first min(N, requested_utts) examples, a whole number of batches, in order.
      TaskPipelineOptions options;
      options.what = what;
      options.segment_length =
          spec_.validation_segments == "full" ? std::string("full") : context.segment_length;
      options.max_examples = spec_.requested_utts;
      options.plan.batch_size = spec_.batch_size;
      options.plan.shuffle = false;
      options.prefetch = prefetch_;
      auto pipeline = std::make_unique<TaskPipeline>(context.recipe, set.inputs, set.targets,
                                                     options, context.stores);
      const int64_t usable = spec_.requested_utts > 0
                                 ? std::min<int64_t>(pipeline->available(), spec_.requested_utts)
                                 : pipeline->available();
      smallest = smallest < 0 ? usable : std::min(smallest, usable);
      int64_t batches = pipeline->stored_size() / spec_.batch_size;
      num_batches_ = num_batches_ < 0 ? batches : std::min(num_batches_, batches);
      sets_.push_back({set, set.weight / first_weight, std::move(pipeline)});
    }
    if (num_batches_ > 0 || shrunk || smallest <= 0) break;
    logger().info("{}: batch_size {} ({}) is larger than the {} examples available; they are "
                 "evaluated in one batch of {}",
                 what, spec_.batch_size, batch_size_origin(section, context.evaluator), smallest,
                 smallest);
    spec_.batch_size = static_cast<int>(smallest);
  }
  if (num_batches_ <= 0)
    throw ConfigError(what + ": no example to evaluate (" +
                      batch_size_origin(section, context.evaluator) + ")");
}

EvaluationResult TaskLossEvaluator::evaluate(int64_t max_batches, Communicator* communicator,
                                             const BatchCallback& on_batch) {
  torch::NoGradGuard no_grad;
  int64_t batches = max_batches < 0 ? num_batches_ : std::min(max_batches, num_batches_);
  int rank = communicator ? communicator->rank() : 0;
  int world = communicator ? communicator->world_size() : 1;
  EvaluationResult result;
  // Per set: (loss, norm) unweighted, reduced over the ranks with the totals.
  std::vector<double> set_sums(2 * sets_.size(), 0.0);
  for (std::size_t s = 0; s < sets_.size(); ++s) {
    const auto& data = sets_[s];
    auto pipeline = data.pipeline->start();
    for (int64_t b = 0; b < batches; ++b) {
      auto batch = pipeline->next();
      if (!batch) break;
      if (b % world != rank) continue;
      batch = on_device(std::move(*batch), graph_->bank().device());
      auto outputs = graph_->forward(model_inputs(*batch, spec_.input_names), batch->lengths,
                                     /*training=*/false);
      auto loss =
          batch_loss(*loss_, *batch, spec_.input_names.front(), spec_.target_names, outputs);
      const double set_loss = loss.loss.item<double>(), set_norm = loss.norm.item<double>();
      result.loss += data.weight * set_loss;
      result.norm += data.weight * set_norm;
      set_sums[2 * s] += set_loss;
      set_sums[2 * s + 1] += set_norm;
      result.batches += 1;
      result.examples += batch->size();
      if (on_batch) on_batch(*batch, outputs);
      if (communicator) communicator->tick();
    }
  }
  if (communicator && world > 1) {
    std::vector<double> values = {result.loss, result.norm, static_cast<double>(result.batches),
                                  static_cast<double>(result.examples)};
    values.insert(values.end(), set_sums.begin(), set_sums.end());
    auto sums = all_reduce_sum(*communicator, values);
    result.loss = sums[0];
    result.norm = sums[1];
    result.batches = static_cast<int64_t>(sums[2]);
    result.examples = static_cast<int64_t>(sums[3]);
    std::copy(sums.begin() + 4, sums.end(), set_sums.begin());
  }
  if (sets_.size() > 1)
    for (std::size_t s = 0; s < sets_.size(); ++s)
      result.set_values[sets_[s].set.name] =
          set_sums[2 * s + 1] != 0 ? set_sums[2 * s] / set_sums[2 * s + 1] : 0.0;
  return result;
}

}  // namespace nabu
