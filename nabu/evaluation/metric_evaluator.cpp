// metric_evaluator: validation by what users select on (docs/trainer.md, "Validation by metric").
// The task's loss evaluator runs over whole validation utterances and hands each utterance's
// outputs here, where they are reconstructed and scored against the references: SDR (BSS Eval v3)
// or SI-SDR for separation tasks, the token error rate after CTC decoding for recognition tasks.
// A task section of validation_evaluator.cfg selects it with `validation_metric`.
#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/evaluators/task_loss_evaluator.h"
#include "nabu/inference/reconstructors/reconstructor.h"
#include "nabu/evaluation/recognition.h"
#include "nabu/evaluation/scorers/pesq.h"
#include "nabu/evaluation/scorers/stoi.h"
#include "nabu/evaluation/scorers/bss_eval.h"
#include "nabu/evaluation/scorers/edit_distance.h"
#include "nabu/processing/section_reader.h"

namespace nabu {

namespace {

// Documentation of the keys (`nabu list evaluator`); they sit in the task section of
// validation_evaluator.cfg among the graph keys, so they are read one by one.
struct MetricEvaluatorOptions {
  std::string validation_metric, metric_org_mix, metric_usedbins, metric_org_src,
      metric_references;
  int requested_utts = 0, batch_size = 0, metric_utts = 0, tensorboard_audio = 0;
  void declare(OptionsReader& r) {
    r.choice("validation_metric", validation_metric,
             {"loss", "sdr", "si_sdr", "stoi", "estoi", "pesq", "error_rate"},
             "what validation selects on: loss (task_loss_evaluator), sdr (BSS Eval v3), "
             "si_sdr, stoi, estoi or pesq of the reconstructed signals, or error_rate of the "
             "CTC-decoded labels; in the task section or in [evaluator]");
    r("metric_org_mix", metric_org_mix,
      "sdr, si_sdr, stoi, estoi, pesq: database section of the validation mixtures' complex spectrum (as "
      "reconstructor.cfg's org_mix for the test set)");
    r("metric_usedbins", metric_usedbins,
      "sdr, si_sdr, stoi, estoi, pesq: database section of the validation used-bins masks, when the task's "
      "reconstruct_type needs them");
    r("metric_org_src", metric_org_src,
      "sdr, si_sdr, stoi, estoi, pesq: database section of the validation sources (as scorer.cfg's org_src)");
    r("metric_references", metric_references,
      "error_rate: database section of the validation transcriptions");
    r("metric_utts", metric_utts,
      "score only the first N validation utterances (0 = all the loss is computed over): "
      "reconstruction is the slow part (k-means of deep clustering: about 1 s per utterance "
      "on one core), the loss is still over all");
    r("tensorboard_audio", tensorboard_audio,
      "sdr, si_sdr, stoi, estoi, pesq: the separated signals of the first N validation "
      "utterances written at every validation into the experiment's TensorBoard files (audio "
      "tab), their references at the first; 0 = none");
    r("requested_utts", requested_utts, "examples evaluated at most (as task_loss_evaluator)");
    r("batch_size", batch_size, "examples per batch (as task_loss_evaluator)");
  }
};

// The value a signal that cannot be scored (a silent estimate) counts as, in dB.
constexpr double kUnscorableDb = -50.0;

class MetricEvaluator : public Evaluator {
 public:
  explicit MetricEvaluator(const EvaluatorContext& context);
  const TaskSpec& spec() const override { return loss_->spec(); }
  ModelGraph& graph() override { return loss_->graph(); }
  int64_t num_batches() const override { return loss_->num_batches(); }
  EvaluationResult evaluate(int64_t max_batches, Communicator* communicator,
                            const BatchCallback& on_batch) override;

 private:
  // Adds one utterance's score to sum_ and count_.
  void score(const std::string& utterance, const TensorMap& outputs);
  void score_signals(const std::string& utterance, const TensorMap& outputs);
  // [S, N] of a mask reconstructor: its masks applied to the mixture's spectrum.
  torch::Tensor masked_signals(const std::string& utterance, const TensorMap& outputs);
  void score_labels(const std::string& utterance, const TensorMap& outputs);
  // The first tensorboard_audio utterances' signals into audio_.
  void keep_audio(const std::string& utterance, const torch::Tensor& estimates,
                  const torch::Tensor& references, int rate);

  std::string metric_;
  int64_t metric_utts_ = 0;  // 0: all
  std::unique_ptr<TaskLossEvaluator> loss_;
  // sdr / si_sdr
  ReconstructorPtr reconstructor_;
  std::unique_ptr<SectionReader> mixture_, usedbins_, sources_;
  // error_rate
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<SectionReader> references_;
  double sum_ = 0;
  int64_t count_ = 0;
  // tensorboard_audio: how many utterances, how many are still to keep in this evaluation, and
  // whether the references were kept once.
  int64_t audio_utts_ = 0, audio_left_ = 0;
  bool references_kept_ = false;
  std::vector<AudioClip> audio_;
};

std::string metric_of(const EvaluatorContext& context) {
  std::string metric = context.section.get_string("validation_metric", "");
  if (metric.empty() && context.evaluator)
    metric = context.evaluator->get_string("validation_metric", "");
  return metric;
}

// A database section named by `key` of the task section, which must exist.
std::unique_ptr<SectionReader> section_reader(const EvaluatorContext& context,
                                              const std::string& key, const std::string& why) {
  if (!context.section.has(key))
    context.section.fail(key, "is required by validation_metric = " + metric_of(context) + " (" +
                                  why + ")");
  std::string name = context.section.get_string(key);
  if (!context.recipe.get("database.conf").has_section(name))
    context.section.fail(key, "database.conf has no section [" + name + "]");
  return std::make_unique<SectionReader>(context.recipe, name);
}

EvaluatorContext whole_utterances(const EvaluatorContext& context) {
  EvaluatorContext whole = context;
  whole.segment_length = "full";
  return whole;
}

MetricEvaluator::MetricEvaluator(const EvaluatorContext& context) : metric_(metric_of(context)) {
  const ConfigSection& section = context.section;
  metric_utts_ = section.get_int("metric_utts", 0);
  if (metric_utts_ < 0) section.fail("metric_utts", "must not be negative (0 = all)");
  audio_utts_ = section.get_int("tensorboard_audio", 0);
  if (audio_utts_ < 0) section.fail("tensorboard_audio", "must not be negative (0 = none)");
  const ConfigSection& metric_source =
      section.has("validation_metric") || !context.evaluator ? section : *context.evaluator;
  if (metric_ != "sdr" && metric_ != "si_sdr" && metric_ != "stoi" && metric_ != "estoi" &&
      metric_ != "pesq" && metric_ != "error_rate")
    metric_source.fail("validation_metric", "'" + metric_ + "' is not one of " +
                                                join(validation_metrics(), ", "));
  // Signals and label sequences need whole utterances, whatever the stage's segment length.
  loss_ = std::make_unique<TaskLossEvaluator>(whole_utterances(context));
  const std::string& task = loss_->spec().name;
  if (metric_ == "error_rate") {
    if (audio_utts_ > 0)
      section.fail("tensorboard_audio", "validation_metric = error_rate separates no signals");
    const ConfigFile* decoders = context.recipe.find("decoder.cfg");
    if (!decoders || !decoders->has_section(task))
      metric_source.fail("validation_metric", "error_rate decodes with decoder.cfg's [" + task +
                                                  "], which the recipe does not have");
    decoder_ = std::make_unique<Decoder>(decoders->section(task), context.recipe);
    references_ = section_reader(context, "metric_references", "the reference transcriptions");
    return;
  }
  const ConfigFile* reconstructors = context.recipe.find("reconstructor.cfg");
  if (!reconstructors || !reconstructors->has_section(task))
    metric_source.fail("validation_metric", metric_ + " reconstructs with reconstructor.cfg's [" +
                                                task + "], which the recipe does not have");
  reconstructor_ = make_reconstructor(reconstructors->section(task));
  sources_ = section_reader(context, "metric_org_src", "the sources to score against");
  if (reconstructor_->estimates_signals()) return;
  mixture_ = section_reader(context, "metric_org_mix", "the mixtures' complex spectrum");
  if (!mixture_->feature_options() || mixture_->feature_options()->feature != "spec")
    section.fail("metric_org_mix", "section [" + mixture_->section() +
                                       "] must give the complex spectrum (feature = spec)");
  if (reconstructor_->needs_usedbins())
    usedbins_ = section_reader(context, "metric_usedbins",
                               "reconstruct_type " + reconstructor_->type() + " masks bins");
}

torch::Tensor MetricEvaluator::masked_signals(const std::string& utterance,
                                              const TensorMap& outputs) {
  int rate = 0;
  auto spectrum = mixture_->read(utterance, &rate);
  torch::Tensor usedbins;
  if (usedbins_) usedbins = usedbins_->read(utterance);
  auto masks = reconstructor_->masks(outputs, usedbins);
  FrameSettings settings = mixture_->feature_options()->frames(rate);
  return masks_to_signals(masks, spectrum, settings, frames_span(spectrum.size(0), settings));
}

void MetricEvaluator::score_signals(const std::string& utterance, const TensorMap& outputs) {
  auto estimates = reconstructor_->estimates_signals()
                       ? reconstructor_->signals(outputs, /*normalise=*/true)
                       : masked_signals(utterance, outputs);
  int rate = 0;
  auto references = sources_->read(utterance, &rate);
  if (references.size(0) != estimates.size(0))
    throw DataError("validation utterance " + utterance + ": [" + sources_->section() + "] has " +
                    std::to_string(references.size(0)) + " sources, the reconstructor makes " +
                    std::to_string(estimates.size(0)));
  int64_t length = std::min(references.size(1), estimates.size(1));
  references = references.slice(1, 0, length);
  estimates = estimates.slice(1, 0, length);
  keep_audio(utterance, estimates, references, rate);
  if (metric_ == "pesq") {
    try {
      sum_ += pesq_of_sources(references, estimates, rate);
      count_ += 1;
    } catch (const Error& e) {
      // A reference PESQ finds no speech in says nothing of the model: left out.
      logger().debug("validation utterance {}: {}; not counted", utterance, e.what());
    }
    return;
  }
  if (metric_ == "stoi" || metric_ == "estoi") {
    sum_ += stoi_of_sources(references, estimates, rate, metric_ == "estoi");
    count_ += 1;
    return;
  }
  try {
    auto scores = metric_ == "sdr" ? bss_eval_sources(references, estimates)
                                   : si_sdr_sources(references, estimates);
    double total = 0;
    for (double value : scores.sdr) total += value;
    sum_ += total / static_cast<double>(scores.sdr.size());
  } catch (const Error& e) {
    // A silent estimate of an early model: the worst score rather than a stopped training.
    logger().debug("validation utterance {}: {}; counted as {} dB", utterance, e.what(),
                  kUnscorableDb);
    sum_ += kUnscorableDb;
  }
  count_ += 1;
}

void MetricEvaluator::keep_audio(const std::string& utterance, const torch::Tensor& estimates,
                                 const torch::Tensor& references, int rate) {
  if (audio_left_ <= 0) return;
  --audio_left_;
  // Each signal peaks at 0.9, so that quiet estimates of an early model can be heard.
  auto clip = [&](const std::string& name, const torch::Tensor& signal) {
    auto samples = signal.to(torch::kFloat32).contiguous();
    samples = samples / samples.abs().max().clamp_min(1e-9) * 0.9;
    audio_.push_back({"audio/" + spec().name + "/" + utterance + "/" + name,
                      {samples.data_ptr<float>(), samples.data_ptr<float>() + samples.numel()},
                      rate});
  };
  for (int64_t s = 0; s < estimates.size(0); ++s)
    clip("separated_" + std::to_string(s + 1), estimates[s]);
  if (references_kept_) return;
  for (int64_t s = 0; s < references.size(0); ++s)
    clip("reference_" + std::to_string(s + 1), references[s]);
}

void MetricEvaluator::score_labels(const std::string& utterance, const TensorMap& outputs) {
  if (!references_->has(utterance))
    throw DataError("validation utterance '" + utterance + "' has no reference in section [" +
                    references_->section() + "]");
  EditCounts counts = align_edits(references_->line(utterance).fields, decoder_->decode(outputs));
  sum_ += static_cast<double>(counts.errors());
  count_ += counts.reference_length;
}

void MetricEvaluator::score(const std::string& utterance, const TensorMap& outputs) {
  if (decoder_) score_labels(utterance, outputs);
  else score_signals(utterance, outputs);
}

EvaluationResult MetricEvaluator::evaluate(int64_t max_batches, Communicator* communicator,
                                           const BatchCallback& on_batch) {
  sum_ = 0;
  count_ = 0;
  audio_.clear();
  // Only the chief writes TensorBoard files; it keeps the first utterances it scores.
  audio_left_ = communicator && !communicator->is_chief() ? 0 : audio_utts_;
  const std::string& lengths_of = loss_->spec().input_names.front();
  // Rank r evaluates batches r, r + W, ...: the k-th batch it sees is batch r + k W of all.
  const int64_t rank = communicator ? communicator->rank() : 0;
  const int64_t world = communicator ? communicator->world_size() : 1;
  const int64_t batch_size = loss_->spec().batch_size;
  int64_t seen = 0;
  EvaluationResult result = loss_->evaluate(
      max_batches, communicator, [&](const Batch& batch, const TensorMap& outputs) {
        if (on_batch) on_batch(batch, outputs);
        const auto& lengths = batch.lengths.at(lengths_of);
        const int64_t first = (rank + seen++ * world) * batch_size;
        for (int64_t b = 0; b < batch.size(); ++b) {
          if (metric_utts_ > 0 && first + b >= metric_utts_) break;
          // Reconstruction and scoring run on the CPU, where the references are read.
          TensorMap utterance;
          for (const auto& [name, tensor] : outputs)
            utterance[name] =
                tensor[b].slice(0, 0, std::min(lengths[b].item<int64_t>(), tensor.size(1))).cpu();
          score(batch.names[b], utterance);
        }
      });
  double sum = sum_, count = static_cast<double>(count_);
  if (communicator && communicator->world_size() > 1) {
    auto sums = all_reduce_sum(*communicator, {sum, count});
    sum = sums[0];
    count = sums[1];
  }
  result.metric = metric_;
  result.metric_sum = sum;
  result.metric_count = count;
  result.higher_is_better = metric_ != "error_rate";
  if (!audio_.empty()) references_kept_ = true;
  result.audio = std::move(audio_);
  audio_.clear();
  return result;
}

}  // namespace

NABU_REGISTER_DOCUMENTED(evaluator_registry, "metric_evaluator",
                         [](const EvaluatorContext& context) -> EvaluatorPtr {
                           return std::make_unique<MetricEvaluator>(context);
                         },
                         MetricEvaluatorOptions,
                         "validation by a metric: the task's outputs on whole validation "
                         "utterances reconstructed and scored (sdr, si_sdr) or decoded and "
                         "scored (error_rate); chosen by validation_metric");

}  // namespace nabu
