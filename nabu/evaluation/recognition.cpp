#include "nabu/evaluation/recognition.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"
#include "nabu/evaluation/scorers/sequence_scorer.h"
#include "nabu/processing/audio_stream.h"
#include "nabu/processing/section_reader.h"

namespace nabu {

Decoder::Decoder(const ConfigSection& section, const Recipe& recipe)
    : decoder_(make_decoder(section)), where_(section.where("alphabet")) {
  const std::string& section_name = options().alphabet;
  if (!recipe.get("database.conf").has_section(section_name))
    section.fail("alphabet", "database.conf has no section [" + section_name + "]");
  SectionReader reader(recipe, section_name);
  const auto* alphabet = reader.processor().alphabet();
  if (!alphabet)
    section.fail("alphabet", "section [" + section_name +
                                 "] has no alphabet (its processor must be a text_processor)");
  labels_ = *alphabet;
}

std::vector<std::string> Decoder::decode(const TensorMap& outputs) const {
  torch::Tensor logits;
  if (!options().output.empty()) {
    logits = get_tensor(outputs, options().output, "decoder");
  } else if (outputs.size() == 1) {
    logits = outputs.begin()->second;
  } else {
    throw ConfigError(where_ + ": the task has several outputs; name one with `output = NAME`");
  }
  if (logits.dim() != 2)
    throw Error("decoder: the logits of one utterance must be [T, C], got rank " +
                std::to_string(logits.dim()));
  const int64_t classes = logits.size(1);
  const int64_t blank = options().blank < 0 ? classes - 1 : options().blank;
  if (classes != static_cast<int64_t>(labels_.size()) + 1)
    throw Error(where_ + ": the output has " + std::to_string(classes) + " classes but the " +
                "alphabet has " + std::to_string(labels_.size()) + " labels (plus the blank: " +
                std::to_string(labels_.size() + 1) + ")");
  auto log_probs = torch::log_softmax(logits.to(torch::kDouble), 1);
  std::vector<std::string> labels;
  for (auto index : decoder_->decode(log_probs, blank)) {
    // Class indices above the blank map to the label one below (the blank takes a slot).
    int64_t label = index < blank ? index : index - 1;
    labels.push_back(labels_.at(label));
  }
  return labels;
}

std::vector<std::string> recognize_file(TrainedExperiment& model, const std::string& task,
                                        const Decoder& decoder, const fs::path& path,
                                        int channel) {
  AudioReader reader(path, channel);
  const int model_rate = model.input_sample_rate(task);
  if (model_rate == 0) throw Error("test task " + task + " has no inputs to compute from audio");
  Resampler to_model(reader.sample_rate(), model_rate);
  std::vector<double> samples;
  for (auto block = reader.read(1 << 16); !block.empty(); block = reader.read(1 << 16)) {
    auto converted = to_model.process(block);
    samples.insert(samples.end(), converted.begin(), converted.end());
  }
  auto rest = to_model.flush();
  samples.insert(samples.end(), rest.begin(), rest.end());
  auto signal = torch::tensor(samples, torch::kFloat64);
  try {
    return decoder.decode(model.forward_samples(task, signal, model_rate));
  } catch (const DataError& e) {
    throw DataError(path.string() + ": " + e.what());
  } catch (const c10::Error& e) {
    // A signal shorter than one analysis frame, or the like: name the file, keep going.
    throw DataError(path.string() + ": cannot be recognised: " + e.what_without_backtrace());
  }
}

bool is_recognition_task(const Recipe& recipe, const std::string& task) {
  const ConfigFile* decoders = recipe.find("decoder.cfg");
  return decoders && decoders->has_section(task);
}

std::vector<std::string> check_recognition_task(const Recipe& recipe, const std::string& task) {
  auto problems = check_decoder(recipe.get("decoder.cfg").section(task));
  const ConfigFile* scorers = recipe.find("scorer.cfg");
  if (const ConfigSection* scorer = scorers ? scorers->find_section(task) : nullptr)
    for (auto& problem : check_sequence_scorer(*scorer)) problems.push_back(problem);
  return problems;
}

namespace {

// The scorer of a recognition task and the section of its references; nullptr without a
// scorer.cfg section (the hypotheses are then written but not scored).
struct Scoring {
  SequenceScorerPtr scorer;
  std::unique_ptr<SectionReader> references;
  nlohmann::json utterances = nlohmann::json::object();
};

std::unique_ptr<Scoring> make_recognition_scoring(const Recipe& recipe, const std::string& task) {
  const ConfigFile* scorers = recipe.find("scorer.cfg");
  const ConfigSection* section = scorers ? scorers->find_section(task) : nullptr;
  if (!section) {
    logger().warn("task {}: no [{}] in scorer.cfg: hypotheses are written but not scored", task,
                 task);
    return nullptr;
  }
  auto scoring = std::make_unique<Scoring>();
  scoring->scorer = make_sequence_scorer(*section);
  const std::string& references = scoring->scorer->options().references;
  if (!recipe.get("database.conf").has_section(references))
    section->fail("references", "database.conf has no section [" + references + "]");
  scoring->references = std::make_unique<SectionReader>(recipe, references);
  return scoring;
}

}  // namespace

EvaluationResult run_recognition_test(const Recipe& recipe, TrainedExperiment& model,
                                      const std::string& task, const fs::path& testdir,
                                      int64_t max_utterances,
                                      const std::function<void(const std::string&)>& on_summary) {
  Decoder decoder(recipe.get("decoder.cfg").section(task), recipe);
  auto scoring = make_recognition_scoring(recipe, task);
  std::string hypotheses;
  int64_t done = 0;
  auto loss = model.evaluate_outputs(task, max_utterances, [&](const std::string& utterance,
                                                               const TensorMap& outputs) {
    auto labels = decoder.decode(outputs);
    hypotheses += utterance + (labels.empty() ? "" : " " + join(labels, " ")) + "\n";
    ++done;
    if (!scoring) return;
    if (!scoring->references->has(utterance))
      throw DataError("recognition task " + task + ": utterance '" + utterance +
                      "' has no reference in section [" + scoring->references->section() + "]");
    scoring->utterances[utterance] =
        scoring->scorer->add(scoring->references->line(utterance).fields, labels);
  });
  write_file_atomic(testdir / task / "hyp.txt", hypotheses);
  logger().info("task {}: test loss {:.6g} over {} utterances; {} hypotheses ({}) in {}", task,
               loss.value(), loss.examples, done, decoder.options().decoder,
               (testdir / task / "hyp.txt").string());
  if (scoring) {
    const std::string results = "results_" + task + "_" + scoring->scorer->type();
    nlohmann::json summary = scoring->scorer->summary();
    summary["decoder"] = decoder.options().decoder;
    write_file_atomic(testdir / (results + "_complete.json"), scoring->utterances.dump(2) + "\n");
    write_file_atomic(testdir / (results + "_summary.json"), summary.dump(2) + "\n");
    if (on_summary) on_summary(scoring->scorer->summary_line(decoder.options().decoder) + "\n");
  }
  return loss;
}

}  // namespace nabu
