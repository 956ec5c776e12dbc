#include "nabu/postprocessing/recognition.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"
#include "nabu/postprocessing/decoders/ctc_decoding.h"
#include "nabu/postprocessing/scorers/edit_distance.h"
#include "nabu/processing/audio_stream.h"
#include "nabu/processing/section_reader.h"

namespace nabu {

void DecoderOptions::declare(OptionsReader& r) {
  r.choice("decoder", decoder, {"greedy", "beam_search"},
           "greedy (best path) or beam_search (CTC prefix beam search)");
  r("beam_width", beam_width, "prefixes kept per frame by beam_search");
  r("output", output, "the logits output [T, C] (default: the task's only output)");
  r("blank", blank, "index of the blank class; -1: the last class");
  r("alphabet", alphabet, "database section whose text_processor names the labels (required)");
  r.require(beam_width >= 1, "beam_width", "must be at least 1");
  r.require(blank >= -1, "blank", "must be -1 (the last class) or a class index");
  r.require(!alphabet.empty(), "alphabet", "name the database section of the transcriptions");
}

void ErrorRateScorerOptions::declare(OptionsReader& r) {
  r.choice("score_type", score_type, {"error_rate"},
           "error_rate: edit distance of the hypotheses to the references");
  r("references", references, "database section of the reference transcriptions");
  r("unit", unit, "what a label is (phone, word, character): names the rate");
  r.require(!references.empty(), "references", "name the database section of the references");
}

Decoder::Decoder(const ConfigSection& section, const Recipe& recipe)
    : options_(read_options<DecoderOptions>(section, "decoder")),
      where_(section.where("alphabet")) {
  if (!recipe.get("database.conf").has_section(options_.alphabet))
    section.fail("alphabet", "database.conf has no section [" + options_.alphabet + "]");
  SectionReader reader(recipe, options_.alphabet);
  const auto* alphabet = reader.processor().alphabet();
  if (!alphabet)
    section.fail("alphabet", "section [" + options_.alphabet +
                                 "] has no alphabet (its processor must be a text_processor)");
  labels_ = *alphabet;
}

std::vector<std::string> Decoder::decode(const TensorMap& outputs) const {
  torch::Tensor logits;
  if (!options_.output.empty()) {
    logits = get_tensor(outputs, options_.output, "decoder");
  } else if (outputs.size() == 1) {
    logits = outputs.begin()->second;
  } else {
    throw ConfigError(where_ + ": the task has several outputs; name one with `output = NAME`");
  }
  if (logits.dim() != 2)
    throw Error("decoder: the logits of one utterance must be [T, C], got rank " +
                std::to_string(logits.dim()));
  const int64_t classes = logits.size(1);
  const int64_t blank = options_.blank < 0 ? classes - 1 : options_.blank;
  if (classes != static_cast<int64_t>(labels_.size()) + 1)
    throw Error(where_ + ": the output has " + std::to_string(classes) + " classes but the " +
                "alphabet has " + std::to_string(labels_.size()) + " labels (plus the blank: " +
                std::to_string(labels_.size() + 1) + ")");
  auto log_probs = torch::log_softmax(logits.to(torch::kDouble), 1);
  std::vector<int64_t> indices =
      options_.decoder == "greedy"
          ? ctc_greedy_decode(log_probs, blank)
          : ctc_prefix_beam_search(log_probs, blank, options_.beam_width).front().labels;
  std::vector<std::string> labels;
  for (auto index : indices) {
    // Class indices above the blank map to the label one below (the blank takes a slot).
    int64_t label = index < blank ? index : index - 1;
    labels.push_back(labels_.at(label));
  }
  return labels;
}

std::vector<std::string> recognize_file(Separator& model, const std::string& task,
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
  auto problems = options_checker<DecoderOptions>("decoder")(recipe.get("decoder.cfg").section(task));
  const ConfigFile* scorers = recipe.find("scorer.cfg");
  if (const ConfigSection* scorer = scorers ? scorers->find_section(task) : nullptr)
    for (auto& problem :
         options_checker<ErrorRateScorerOptions>("scorer of recognition task " + task)(*scorer))
      problems.push_back(problem);
  return problems;
}

namespace {

struct ErrorRateScoring {
  std::unique_ptr<SectionReader> references;
  std::string unit = "label";
  EditCounts total;
  nlohmann::json utterances = nlohmann::json::object();
};

std::unique_ptr<ErrorRateScoring> make_error_rate_scoring(const Recipe& recipe,
                                                          const std::string& task) {
  const ConfigFile* scorers = recipe.find("scorer.cfg");
  const ConfigSection* section = scorers ? scorers->find_section(task) : nullptr;
  if (!section) {
    spdlog::warn("task {}: no [{}] in scorer.cfg: hypotheses are written but not scored", task,
                 task);
    return nullptr;
  }
  auto options = read_options<ErrorRateScorerOptions>(*section, "scorer of recognition task " + task);
  if (!recipe.get("database.conf").has_section(options.references))
    section->fail("references", "database.conf has no section [" + options.references + "]");
  auto scoring = std::make_unique<ErrorRateScoring>();
  scoring->references = std::make_unique<SectionReader>(recipe, options.references);
  scoring->unit = options.unit;
  return scoring;
}

// "PER" for phones, "WER" for words, "CER" for characters, else "<unit> error rate".
std::string rate_name(const std::string& unit) {
  if (unit == "phone") return "PER";
  if (unit == "word") return "WER";
  if (unit == "character" || unit == "char") return "CER";
  return unit + " error rate";
}

}  // namespace

EvaluationResult run_recognition_test(const Recipe& recipe, Separator& model,
                                      const std::string& task, const fs::path& testdir,
                                      int64_t max_utterances,
                                      const std::function<void(const std::string&)>& on_summary) {
  Decoder decoder(recipe.get("decoder.cfg").section(task), recipe);
  auto scoring = make_error_rate_scoring(recipe, task);
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
    auto counts = align_edits(scoring->references->line(utterance).fields, labels);
    scoring->total += counts;
    scoring->utterances[utterance] = {{"reference_length", counts.reference_length},
                                      {"substitutions", counts.substitutions},
                                      {"deletions", counts.deletions},
                                      {"insertions", counts.insertions},
                                      {"error_rate", counts.rate()}};
  });
  write_file_atomic(testdir / task / "hyp.txt", hypotheses);
  spdlog::info("task {}: test loss {:.6g} over {} utterances; {} hypotheses ({}) in {}", task,
               loss.value(), loss.examples, done, decoder.options().decoder,
               (testdir / task / "hyp.txt").string());
  if (scoring) {
    const EditCounts& t = scoring->total;
    nlohmann::json summary = {{"unit", scoring->unit},
                              {"decoder", decoder.options().decoder},
                              {"utterances", done},
                              {"reference_length", t.reference_length},
                              {"substitutions", t.substitutions},
                              {"deletions", t.deletions},
                              {"insertions", t.insertions},
                              {"error_rate", t.rate()}};
    write_file_atomic(testdir / ("results_" + task + "_error_rate_complete.json"),
                      scoring->utterances.dump(2) + "\n");
    write_file_atomic(testdir / ("results_" + task + "_error_rate_summary.json"),
                      summary.dump(2) + "\n");
    if (on_summary)
      on_summary(fmt::format("{} ({} decoding): {:.2f} % over {} {}s of {} utterances "
                             "(substitutions {}, deletions {}, insertions {})\n",
                             rate_name(scoring->unit), decoder.options().decoder,
                             100.0 * t.rate(), t.reference_length, scoring->unit, done,
                             t.substitutions, t.deletions, t.insertions));
  }
  return loss;
}

}  // namespace nabu
