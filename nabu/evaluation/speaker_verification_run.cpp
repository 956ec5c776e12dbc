// The speaker-verification test run (speaker_verification.h): the handler's speaker vectors of
// every tested mixture, then per scorer the trials, their cosine scores, the metrics and the
// result files.
#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"
#include "nabu/evaluation/scorers/score_summary.h"
#include "nabu/experiment/trained_experiment.h"
#include "nabu/evaluation/speaker_verification.h"
#include "nabu/processing/section_reader.h"

namespace nabu {

namespace {

// [S, D] from one utterance's outputs.
torch::Tensor speaker_vectors(const SpeakerVerificationHandlerOptions& options,
                              const std::string& task, const std::string& utterance,
                              const TensorMap& outputs, const SectionReader* usedbins,
                              const SeparatedTaskRecord* masks_of) {
  const std::string output = !options.output_names.empty()         ? options.output_names.front()
                             : options.type == "ivector_extractor" ? "attractor"
                                                                   : "speaker_bin_embeddings";
  auto found = outputs.find(output);
  if (found == outputs.end())
    throw ConfigError(std::string(kSpeakerVerificationHandlerFile) + ": [" + task +
                      "] uses the output '" + output + "', which test task [" + task +
                      "] does not request (outputs)");
  torch::Tensor vectors;
  if (options.type == "ivector_extractor") {
    vectors = found->second.to(torch::kFloat64).reshape({found->second.size(0), -1});
  } else {
    auto embeddings = found->second.to(torch::kFloat64);
    const int64_t frames = embeddings.size(0);
    if (embeddings.size(1) % options.emb_dim != 0)
      throw ConfigError(std::string(kSpeakerVerificationHandlerFile) + ": [" + task +
                        "] emb_dim = " + std::to_string(options.emb_dim) +
                        " does not divide the output's " + std::to_string(embeddings.size(1)) +
                        " values per frame");
    embeddings = embeddings.reshape({frames, -1, options.emb_dim});  // [T, F, D]
    auto mask = masks_of->masks.find(utterance);
    if (mask == masks_of->masks.end())
      throw DataError("speaker verification task " + task + ": utterance " + utterance +
                      " was not separated by task " + options.task_for_masks);
    auto masks = mask->second.to(torch::kFloat64);  // [S, T, F]
    auto bins = usedbins->read(utterance).to(torch::kFloat64);
    const int64_t t = std::min({frames, masks.size(1), bins.size(0)});
    masks = masks.slice(1, 0, t) * bins.slice(0, 0, t).unsqueeze(0);
    embeddings = embeddings.slice(0, 0, t);
    if (options.thr_for_mask >= 0) {
      auto kept = masks >= options.thr_for_mask;
      if (options.binary_masks) {
        masks = kept.to(torch::kFloat64);
      } else {
        masks = masks * kept;
        if (options.rescale_masks && kept.any().item<bool>()) {
          // The kept values stretched to [0, 1] over the whole utterance, as the original.
          auto values = masks.masked_select(kept);
          auto low = values.min(), high = (values - low).max().clamp_min(1e-12);
          masks = torch::where(kept, (masks - low) / high, masks);
        }
      }
    }
    // attractor_s = sum_{t,f} m_s(t,f) v(t,f) / sum_{t,f} m_s(t,f)
    auto weighted = torch::einsum("stf,tfd->sd", {masks, embeddings});
    vectors = weighted / masks.sum({1, 2}).clamp_min(1e-12).unsqueeze(1);
    auto by_type = masks_of->permutations.find(options.score_type_for_perm);
    if (by_type == masks_of->permutations.end())
      throw ConfigError(std::string(kSpeakerVerificationHandlerFile) + ": [" + task +
                        "] score_type_for_perm = " + options.score_type_for_perm + ": task " +
                        options.task_for_masks + " was not scored by it (scorer.cfg score_type)");
    auto permutation = by_type->second.find(utterance);
    if (permutation == by_type->second.end())
      throw DataError("speaker verification task " + task + ": utterance " + utterance +
                      " has no permutation from task " + options.task_for_masks);
    vectors = vectors.index_select(0, torch::tensor(permutation->second, torch::kLong));
  }
  if (options.normalization) vectors = vectors / (vectors.norm(2, 1, /*keepdim=*/true) + 1e-10);
  return vectors;
}

nlohmann::json trials_json(const Trials& trials) {
  nlohmann::json json;
  for (const auto& [mixture, per_speaker] : trials.enrolments) {
    auto& pointers = json["enr_vec_pointers"][mixture];
    auto& labels = json["target_labels"][mixture];
    pointers = nlohmann::json::array();
    labels = nlohmann::json::array();
    for (std::size_t s = 0; s < per_speaker.size(); ++s) {
      nlohmann::json speaker_pointers = nlohmann::json::array(),
                     speaker_labels = nlohmann::json::array();
      for (std::size_t k = 0; k < per_speaker[s].size(); ++k) {
        speaker_pointers.push_back({per_speaker[s][k].first, per_speaker[s][k].second});
        speaker_labels.push_back(trials.targets.at(mixture)[s][k] ? 1 : 0);
      }
      pointers.push_back(speaker_pointers);
      labels.push_back(speaker_labels);
    }
  }
  return json;
}

Trials load_trials(const fs::path& file) {
  Trials trials;
  try {
    auto json = nlohmann::json::parse(read_file(file));
    for (const auto& [mixture, per_speaker] : json.at("enr_vec_pointers").items()) {
      auto& enrolments = trials.enrolments[mixture];
      auto& targets = trials.targets[mixture];
      const auto& labels = json.at("target_labels").at(mixture);
      for (std::size_t s = 0; s < per_speaker.size(); ++s) {
        enrolments.emplace_back();
        targets.emplace_back();
        for (std::size_t k = 0; k < per_speaker[s].size(); ++k) {
          enrolments.back().emplace_back(per_speaker[s][k].at(0).get<std::string>(),
                                         per_speaker[s][k].at(1).get<int>());
          targets.back().push_back(labels.at(s).at(k).get<int>() != 0);
        }
      }
    }
  } catch (const nlohmann::json::exception& error) {
    throw DataError(file.string() +
                    ": not a trial list (enr_vec_pointers, target_labels): " + error.what());
  }
  return trials;
}

using SpeakerVectors = std::map<std::string, torch::Tensor>;  // utterance -> [S, D]

// The handler's vectors of every tested utterance, also written to
// speaker_verification/<task>/vectors.json; `loss` receives the task's test loss.
SpeakerVectors tested_speaker_vectors(const Recipe& recipe, TrainedExperiment& model,
                                      const std::string& task, const fs::path& testdir,
                                      int64_t max_utterances,
                                      const std::map<std::string, SeparatedTaskRecord>& separated,
                                      EvaluationResult& loss) {
  const auto handler = speaker_verification_handler_options(recipe, task);
  const SeparatedTaskRecord* masks_of = nullptr;
  std::unique_ptr<SectionReader> usedbins;
  if (handler.type == "attractor_from_embeddings") {
    auto found = separated.find(handler.task_for_masks);
    if (found == separated.end())
      throw ConfigError(
          recipe.get(kSpeakerVerificationHandlerFile).section(task).where("task_for_masks") +
          ": task " + handler.task_for_masks + " was not tested in this run before [" + task +
          "]: its masks are needed (test both, " + handler.task_for_masks +
          " first in [evaluator] tasks, without --task)");
    masks_of = &found->second;
    usedbins = std::make_unique<SectionReader>(recipe, handler.usedbins);
  }
  SpeakerVectors vectors;
  loss = model.evaluate_outputs(
      task, max_utterances, [&](const std::string& utterance, const TensorMap& outputs) {
        auto v = speaker_vectors(handler, task, utterance, outputs, usedbins.get(), masks_of);
        if (v.size(0) != handler.nrs)
          throw DataError("speaker verification task " + task + ": utterance " + utterance +
                          " has " + std::to_string(v.size(0)) +
                          " speaker vectors, nrs = " + std::to_string(handler.nrs));
        vectors[utterance] = v;
      });
  nlohmann::json vectors_json = nlohmann::json::object();
  for (const auto& [utterance, v] : vectors) {
    auto contiguous = v.contiguous();
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t s = 0; s < v.size(0); ++s)
      rows.push_back(std::vector<double>(contiguous[s].data_ptr<double>(),
                                         contiguous[s].data_ptr<double>() + v.size(1)));
    vectors_json[utterance] = rows;
  }
  write_file_atomic(testdir / "speaker_verification" / task / "vectors.json",
                    vectors_json.dump() + "\n");
  logger().info("task {}: {} speaker vectors of {} utterances ({})", task,
               vectors.size() * handler.nrs, vectors.size(), handler.type);
  return vectors;
}

// mvn_score_per_mix_spk: one speaker's trial scores standardised by the mean and deviation of
// all of them ("all") or of its non-target ones.
void standardise_scores(std::vector<double>& scores, const std::vector<bool>& targets,
                        const std::string& mode) {
  if (mode == "False" || scores.empty()) return;
  std::vector<double> basis;
  for (std::size_t k = 0; k < scores.size(); ++k)
    if (mode == "all" || !targets[k]) basis.push_back(scores[k]);
  if (basis.empty()) return;
  double mean = std::accumulate(basis.begin(), basis.end(), 0.0) / basis.size(), var = 0;
  for (double x : basis) var += (x - mean) * (x - mean);
  const double deviation = std::sqrt(var / basis.size());
  for (double& x : scores) x = (x - mean) / (deviation > 0 ? deviation : 1.0);
}

// Every trial's cosine score and whether it is a target, and the per-mixture detail
// (results_*_complete.json).
struct ScoredTrials {
  std::vector<double> scores;
  std::vector<bool> targets;
  nlohmann::json complete = nlohmann::json::object();
};

ScoredTrials score_trials(const Trials& trials, const SpeakerVectors& vectors,
                          const SpeakerVerificationScorerOptions& options) {
  ScoredTrials scored;
  for (const auto& [mixture, per_speaker] : trials.enrolments) {
    auto own = vectors.find(mixture);
    if (own == vectors.end()) continue;  // a loaded list may name untested mixtures
    nlohmann::json mixture_json = nlohmann::json::array();
    for (std::size_t s = 0; s < per_speaker.size(); ++s) {
      std::vector<double> scores;
      std::vector<bool> targets;
      for (std::size_t k = 0; k < per_speaker[s].size(); ++k) {
        const auto& [other, index] = per_speaker[s][k];
        auto enrolment = vectors.find(other);
        if (enrolment == vectors.end() || index < 0 || index >= enrolment->second.size(0)) continue;
        auto a = own->second[static_cast<int64_t>(s)], b = enrolment->second[index];
        scores.push_back((a.dot(b) / (a.norm() * b.norm()).clamp_min(1e-12)).item<double>());
        targets.push_back(trials.targets.at(mixture)[s][k]);
      }
      standardise_scores(scores, targets, options.mvn_score_per_mix_spk);
      scored.scores.insert(scored.scores.end(), scores.begin(), scores.end());
      scored.targets.insert(scored.targets.end(), targets.begin(), targets.end());
      std::vector<int> labels(targets.begin(), targets.end());
      mixture_json.push_back({{"scores", scores}, {"target", labels}});
    }
    scored.complete[mixture] = {{"score", mixture_json}};
  }
  return scored;
}

// The trials of scorer `name`: loaded, or drawn among the tested mixtures.
Trials scorer_trials(const Recipe& recipe, const std::string& name,
                     const SpeakerVerificationScorerOptions& options, const SpeakerVectors& vectors,
                     uint64_t seed) {
  if (options.loads_trials()) return load_trials(options.load_trial_list);
  MixtureSpeakers speakers;
  for (const auto& file :
       recipe.get("database.conf").section(options.spkinfo).get_list("datafiles"))
    for (const auto& [utterance, list] : read_speaker_info(file))
      if (vectors.count(utterance)) speakers[utterance] = list;
  for (const auto& [utterance, v] : vectors)
    if (!speakers.count(utterance))
      throw DataError("speaker verification scorer [" + name + "]: utterance " + utterance +
                      " is not in the speaker info (" + options.spkinfo + ")");
  return draw_trials(speakers, options.num_trials_per_mix_per_spk, options.only_competing_spk,
                     options.gender_specific_trials, seed ^ stable_hash(name));
}

// One scorer: its trials scored, results_<name>_<score_type>_{summary,complete}.json (and the
// trial list, the DET points) written; returns the summary line.
std::string run_scorer(const Recipe& recipe, const std::string& name, const ConfigSection& task,
                       const SpeakerVectors& vectors, const fs::path& testdir, uint64_t seed) {
  const auto options = speaker_verification_scorer_options(recipe, name, task);
  const Trials trials = scorer_trials(recipe, name, options, vectors, seed);
  const ScoredTrials scored = score_trials(trials, vectors, options);
  if (scored.scores.empty())
    throw DataError("speaker verification scorer [" + name + "]: no trials (" +
                    std::to_string(vectors.size()) + " tested utterances)");
  auto metrics = verification_metrics(scored.scores, scored.targets, options.p_target,
                                      options.c_miss, options.c_fa);
  nlohmann::json summary = {{"eer", metrics.eer},
                            {"thr", metrics.eer_threshold},
                            {"min_dcf", metrics.min_dcf},
                            {"min_dcf_thr", metrics.min_dcf_threshold},
                            {"p_target", options.p_target},
                            {"c_miss", options.c_miss},
                            {"c_fa", options.c_fa},
                            {"target_trials", metrics.targets},
                            {"nontarget_trials", metrics.nontargets},
                            {"utterances", vectors.size()}};
  const std::string results = "results_" + name + "_" + options.score_type;
  write_file_atomic(testdir / (results + "_summary.json"), summary.dump(2) + "\n");
  write_file_atomic(testdir / (results + "_complete.json"), scored.complete.dump(1) + "\n");
  if (options.store_trial_list && !options.loads_trials())
    write_file_atomic(testdir / ("trials_" + name + ".json"), trials_json(trials).dump() + "\n");
  if (options.make_figure) {
    // The detection trade-off per distinct score, as the original's figure shows it.
    std::string csv = "threshold,false_positive_rate,false_negative_rate\n";
    for (const auto& point : operating_points(scored.scores, scored.targets))
      csv += fmt::format("{:.6g},{:.6g},{:.6g}\n", point.threshold, point.false_alarm, point.miss);
    write_file_atomic(testdir / ("det_" + name + ".csv"), csv);
  }
  return fmt::format(
      "Result for eer (using {} {}): EER={:.2f}% (threshold={:.3f}), minDCF={:.4f} "
      "(p_target={}), {} target and {} non-target trials\n",
      options.score_type, name, 100 * metrics.eer, metrics.eer_threshold, metrics.min_dcf,
      options.p_target, metrics.targets, metrics.nontargets);
}

}  // namespace

EvaluationResult run_speaker_verification_test(
    const Recipe& recipe, TrainedExperiment& model, const std::string& task, const fs::path& testdir,
    int64_t max_utterances, uint64_t seed,
    const std::map<std::string, SeparatedTaskRecord>& separated,
    const std::function<void(const std::string&)>& on_summary) {
  EvaluationResult loss;
  const auto vectors =
      tested_speaker_vectors(recipe, model, task, testdir, max_utterances, separated, loss);
  const ConfigSection& section = recipe.get("test_evaluator.cfg").section(task);
  for (const auto& name : speaker_verification_scorer_names(section)) {
    const std::string line = run_scorer(recipe, name, section, vectors, testdir, seed);
    if (on_summary)
      on_summary(line);
    else
      logger().info("{}", trim(line));
  }
  return loss;
}

}  // namespace nabu
