#include "nabu/postprocessing/speaker_verification.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"
#include "nabu/postprocessing/scorers/score_summary.h"
#include "nabu/postprocessing/separation.h"
#include "nabu/processing/section_reader.h"

namespace nabu {

namespace {

const char* kHandlerFile = "speaker_verification_handler.cfg";
const char* kScorerFile = "speaker_verification_scorer.cfg";

bool is_none(const std::string& value) { return value.empty() || value == "None"; }

}  // namespace

void SpeakerVerificationHandlerOptions::declare(OptionsReader& r) {
  r.choice("speaker_verification_handler_type", type,
           {"attractor_from_embeddings", "ivector_extractor"},
           "attractor_from_embeddings: the mask-weighted mean of the embeddings per speaker, the "
           "masks from task_for_masks; ivector_extractor: the task's output as it is ([S, D])");
  r("output_names", output_names,
    "the model output to use (default: speaker_bin_embeddings, or attractor for "
    "ivector_extractor)");
  r("normalization", normalization, "scale each speaker's vector to unit length");
  r("nrs", nrs, "speakers per mixture");
  r("emb_dim", emb_dim, "embedding dimensions per bin (attractor_from_embeddings)");
  r("usedbins", usedbins, "database section of the used bins (attractor_from_embeddings)");
  r("task_for_masks", task_for_masks,
    "the separated test task whose masks weigh the embeddings, tested before this one");
  r("score_type_for_perm", score_type_for_perm,
    "the scorer of task_for_masks whose speaker permutation puts the vectors in reference order");
  r("thr_for_mask", thr_for_mask, "masks below this count as 0 (unset: the masks as they are)");
  r("binary_masks", binary_masks, "with thr_for_mask: use the thresholded masks as 0/1");
  r("rescale_masks", rescale_masks,
    "with thr_for_mask and not binary_masks: stretch the kept mask values to [0, 1]");
  r.accepted("store_output", "the vectors are always written (speaker_verification/<task>/)");
  r.accepted("input_features", "the original names the utterances through it; here the task's");
  r.accepted("cut_to_seq_length", "outputs are always cut to the utterance's frames");
  r.accepted("transpose_order", "not needed: outputs come time-major");
  r.require(nrs >= 1, "nrs", "must be at least 1");
  if (type == "attractor_from_embeddings") {
    r.require(emb_dim >= 1, "emb_dim", "required for attractor_from_embeddings (D per bin)");
    r.require(!task_for_masks.empty(), "task_for_masks",
              "required for attractor_from_embeddings: the separated task whose masks to use");
    r.require(!usedbins.empty(), "usedbins", "required for attractor_from_embeddings");
  }
  r.require(output_names.size() <= 1, "output_names", "names one output");
}

void SpeakerVerificationScorerOptions::declare(OptionsReader& r) {
  r.choice("score_type", score_type, {"eer_from_ivec"},
           "eer_from_ivec: trials of each mixture's speaker vectors against other mixtures'");
  r("spkinfo", spkinfo, "database section(s) of the speakers of each mixture (utt_spkinfo.txt)");
  r("nrs", nrs, "speakers per mixture");
  r("num_trials_per_mix_per_spk", num_trials_per_mix_per_spk,
    "target and non-target trials per speaker of each mixture (each at most)");
  r("load_trial_list", load_trial_list,
    "a trials JSON (the original's format, or trials_<scorer>.json of an earlier test) to use "
    "instead of drawing trials");
  r("store_trial_list", store_trial_list, "write the drawn trials as trials_<scorer>.json");
  r.choice("mvn_score_per_mix_spk", mvn_score_per_mix_spk,
           {"False", "True", "all", "non-target only"},
           "normalise each speaker's trial scores by their mean and deviation (all trials, or the "
           "non-target ones)");
  r.choice("gender_specific_trials", gender_specific_trials,
           {"all", "only_m", "only_f", "same_gen", "same_gender", "diff_gen", "diff_gender"},
           "restrict the trials: only male or female speakers, or non-targets of the same or "
           "the other gender");
  r("only_competing_spk", only_competing_spk,
    "non-targets only from the other speakers of the same mixture");
  r("make_figure", make_figure,
    "also write det_<scorer>.csv: false-positive and false-negative rate per threshold");
  r("p_target", p_target, "prior of a target trial in the detection cost");
  r("c_miss", c_miss, "cost of a miss in the detection cost");
  r("c_fa", c_fa, "cost of a false alarm in the detection cost");
  r.accepted("input_features", "the original names the utterances through it; here the task's");
  r.accepted("thr_range", "the EER here is exact, from the sorted scores (no threshold grid)");
  r.require(!spkinfo.empty(), "spkinfo", "required: the speakers of each mixture");
  r.require(num_trials_per_mix_per_spk >= 1, "num_trials_per_mix_per_spk", "must be at least 1");
  r.require(p_target > 0 && p_target < 1, "p_target", "must be in (0, 1)");
  r.require(c_miss > 0 && c_fa > 0, "c_miss", "costs must be positive");
}

std::vector<OperatingPoint> operating_points(const std::vector<double>& scores,
                                             const std::vector<bool>& is_target) {
  const std::size_t n = scores.size();
  const auto targets = std::count(is_target.begin(), is_target.end(), true);
  const auto nontargets = static_cast<int64_t>(n) - targets;
  if (targets == 0 || nontargets == 0)
    throw DataError("speaker verification needs target and non-target trials (" +
                    std::to_string(targets) + " and " + std::to_string(nontargets) + " here)");
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return scores[a] > scores[b];
  });
  std::vector<OperatingPoint> points;
  double accepted_targets = 0, accepted_nontargets = 0;
  for (std::size_t i = 0; i < n;) {
    const double threshold = scores[order[i]];
    for (; i < n && scores[order[i]] == threshold; ++i)
      (is_target[order[i]] ? accepted_targets : accepted_nontargets) += 1;
    points.push_back({threshold, accepted_nontargets / nontargets,
                      1 - accepted_targets / targets});
  }
  return points;
}

VerificationMetrics verification_metrics(const std::vector<double>& scores,
                                         const std::vector<bool>& is_target, double p_target,
                                         double c_miss, double c_fa) {
  const auto points = operating_points(scores, is_target);
  VerificationMetrics metrics;
  metrics.targets = std::count(is_target.begin(), is_target.end(), true);
  metrics.nontargets = static_cast<int64_t>(scores.size()) - metrics.targets;
  const double norm = std::min(c_miss * p_target, c_fa * (1 - p_target));
  // Accepting nothing: no false alarms, every target missed.
  OperatingPoint previous{points.front().threshold + 1, 0.0, 1.0};
  metrics.min_dcf = c_miss * p_target / norm;
  metrics.min_dcf_threshold = previous.threshold;
  bool found_eer = false;
  for (const auto& point : points) {
    const double dcf =
        (c_miss * point.miss * p_target + c_fa * point.false_alarm * (1 - p_target)) / norm;
    if (dcf < metrics.min_dcf) {
      metrics.min_dcf = dcf;
      metrics.min_dcf_threshold = point.threshold;
    }
    if (!found_eer && point.false_alarm >= point.miss) {
      // The crossing lies between the previous operating point and this one.
      const double before = previous.false_alarm - previous.miss;
      const double after = point.false_alarm - point.miss;
      const double alpha = after == before ? 0.0 : -before / (after - before);
      metrics.eer = previous.false_alarm + alpha * (point.false_alarm - previous.false_alarm);
      metrics.eer_threshold = alpha < 0.5 ? previous.threshold : point.threshold;
      found_eer = true;
    }
    previous = point;
  }
  return metrics;
}

Trials draw_trials(const MixtureSpeakers& speakers, int per_speaker, bool only_competing,
                   const std::string& gender_specific_trials, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::map<std::string, std::vector<std::pair<std::string, int>>> occurrences;  // speaker ->
  std::map<std::string, std::string> gender;
  for (const auto& [mixture, list] : speakers)
    for (std::size_t s = 0; s < list.size(); ++s) {
      occurrences[list[s].first].emplace_back(mixture, static_cast<int>(s));
      gender.emplace(list[s].first, list[s].second);
    }
  const std::string& rule = gender_specific_trials;
  auto gender_allowed = [&](const std::string& candidate_gender, const std::string& own) {
    if (rule == "only_m" && candidate_gender == "F") return false;
    if (rule == "only_f" && candidate_gender == "M") return false;
    if ((rule == "same_gen" || rule == "same_gender") && candidate_gender != own) return false;
    if ((rule == "diff_gen" || rule == "diff_gender") && candidate_gender == own) return false;
    return true;
  };
  auto sample = [&](std::vector<std::pair<std::string, int>> candidates) {
    std::shuffle(candidates.begin(), candidates.end(), random);
    if (static_cast<int>(candidates.size()) > per_speaker) candidates.resize(per_speaker);
    return candidates;
  };
  Trials trials;
  for (const auto& [mixture, list] : speakers) {
    auto& enrolments = trials.enrolments[mixture];
    auto& targets = trials.targets[mixture];
    std::set<std::string> own_speakers;
    for (const auto& speaker : list) own_speakers.insert(speaker.first);
    for (std::size_t s = 0; s < list.size(); ++s) {
      const auto& [id, own_gender] = list[s];
      enrolments.emplace_back();
      targets.emplace_back();
      if ((rule == "only_m" && own_gender == "F") || (rule == "only_f" && own_gender == "M"))
        continue;
      std::vector<std::pair<std::string, int>> positive;
      for (const auto& occurrence : occurrences[id])
        if (occurrence.first != mixture) positive.push_back(occurrence);
      std::vector<std::pair<std::string, int>> negative;
      if (!only_competing) {
        for (const auto& [other, other_list] : speakers) {
          bool disjoint = std::none_of(other_list.begin(), other_list.end(), [&](const auto& sp) {
            return own_speakers.count(sp.first) > 0;
          });
          if (!disjoint) continue;
          for (std::size_t o = 0; o < other_list.size(); ++o)
            if (gender_allowed(other_list[o].second, own_gender))
              negative.emplace_back(other, static_cast<int>(o));
        }
      } else {
        for (const auto& competitor : list) {
          if (competitor.first == id) continue;
          for (const auto& occurrence : occurrences[competitor.first])
            if (gender_allowed(competitor.second, own_gender)) negative.push_back(occurrence);
        }
      }
      for (const auto& enrolment : sample(positive)) {
        enrolments.back().push_back(enrolment);
        targets.back().push_back(true);
      }
      for (const auto& enrolment : sample(negative)) {
        enrolments.back().push_back(enrolment);
        targets.back().push_back(false);
      }
    }
  }
  return trials;
}

bool is_speaker_verification_task(const ConfigSection& task) {
  return task.get_string("output_handling_type", "reconstructor") == "speaker_verification";
}

std::vector<std::string> speaker_verification_scorer_names(const ConfigSection& task) {
  return task.has("scorers_names") ? task.get_list("scorers_names")
                                   : std::vector<std::string>{task.name()};
}

namespace {

SpeakerVerificationHandlerOptions handler_options(const Recipe& recipe, const std::string& task) {
  const ConfigFile* file = recipe.find(kHandlerFile);
  if (!file)
    throw ConfigError(recipe.dir().string() + ": test task [" + task +
                      "] is a speaker_verification task but the recipe has no " + kHandlerFile);
  const ConfigSection* section = file->find_section(task);
  if (!section)
    throw ConfigError(file->path() + ": no section [" + task +
                      "] for the speaker_verification test task" +
                      did_you_mean(task, file->section_names()));
  return read_options<SpeakerVerificationHandlerOptions>(*section, kHandlerFile);
}

SpeakerVerificationScorerOptions scorer_options(const Recipe& recipe, const std::string& name,
                                                const ConfigSection& task) {
  const ConfigFile* file = recipe.find(kScorerFile);
  if (!file)
    throw ConfigError(task.where("scorers_names") + ": [" + task.name() +
                      "] is scored by speaker_verification_scorer.cfg, which the recipe lacks");
  const ConfigSection* section = file->find_section(name);
  if (!section)
    throw ConfigError(file->path() + ": no section [" + name + "] (scorers_names of [" +
                      task.name() + "])" + did_you_mean(name, file->section_names()));
  auto options = read_options<SpeakerVerificationScorerOptions>(*section, kScorerFile);
  if (options.mvn_score_per_mix_spk == "True") options.mvn_score_per_mix_spk = "all";
  return options;
}

// [S, D] from one utterance's outputs.
torch::Tensor speaker_vectors(const SpeakerVerificationHandlerOptions& options,
                              const std::string& task, const std::string& utterance,
                              const TensorMap& outputs, const SectionReader* usedbins,
                              const SeparatedTaskRecord* masks_of) {
  const std::string output =
      !options.output_names.empty() ? options.output_names.front()
      : options.type == "ivector_extractor" ? "attractor"
                                            : "speaker_bin_embeddings";
  auto found = outputs.find(output);
  if (found == outputs.end())
    throw ConfigError(std::string(kHandlerFile) + ": [" + task + "] uses the output '" + output +
                      "', which test task [" + task + "] does not request (outputs)");
  torch::Tensor vectors;
  if (options.type == "ivector_extractor") {
    vectors = found->second.to(torch::kFloat64).reshape({found->second.size(0), -1});
  } else {
    auto embeddings = found->second.to(torch::kFloat64);
    const int64_t frames = embeddings.size(0);
    if (embeddings.size(1) % options.emb_dim != 0)
      throw ConfigError(std::string(kHandlerFile) + ": [" + task + "] emb_dim = " +
                        std::to_string(options.emb_dim) + " does not divide the output's " +
                        std::to_string(embeddings.size(1)) + " values per frame");
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
      throw ConfigError(std::string(kHandlerFile) + ": [" + task + "] score_type_for_perm = " +
                        options.score_type_for_perm + ": task " + options.task_for_masks +
                        " was not scored by it (scorer.cfg score_type)");
    auto permutation = by_type->second.find(utterance);
    if (permutation == by_type->second.end())
      throw DataError("speaker verification task " + task + ": utterance " + utterance +
                      " has no permutation from task " + options.task_for_masks);
    vectors = vectors.index_select(0, torch::tensor(permutation->second, torch::kLong));
  }
  if (options.normalization)
    vectors = vectors / (vectors.norm(2, 1, /*keepdim=*/true) + 1e-10);
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
      nlohmann::json speaker_pointers = nlohmann::json::array(), speaker_labels = nlohmann::json::array();
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
    throw DataError(file.string() + ": not a trial list (enr_vec_pointers, target_labels): " +
                    error.what());
  }
  return trials;
}

}  // namespace

std::vector<std::string> tasks_read_for_masks(const Recipe& recipe,
                                              const std::vector<std::string>& tasks) {
  std::vector<std::string> out;
  const ConfigFile& test_cfg = recipe.get("test_evaluator.cfg");
  const ConfigFile* handlers = recipe.find(kHandlerFile);
  for (const auto& task : tasks) {
    const ConfigSection* section = test_cfg.find_section(task);
    if (!section || !is_speaker_verification_task(*section) || !handlers) continue;
    const ConfigSection* handler = handlers->find_section(task);
    if (!handler || !handler->has("task_for_masks")) continue;
    std::string masks = handler->get_string("task_for_masks");
    if (std::find(out.begin(), out.end(), masks) == out.end()) out.push_back(masks);
  }
  return out;
}

std::vector<std::string> check_speaker_verification_task(const Recipe& recipe,
                                                         const std::string& task,
                                                         const std::vector<std::string>& tasks) {
  std::vector<std::string> problems;
  auto guard = [&](const std::function<void()>& action) {
    try {
      action();
      return true;
    } catch (const Error& error) {
      problems.push_back(error.what());
      return false;
    }
  };
  const ConfigSection& section = recipe.get("test_evaluator.cfg").section(task);
  SpeakerVerificationHandlerOptions handler;
  if (guard([&] { handler = handler_options(recipe, task); })) {
    if (handler.type == "attractor_from_embeddings") {
      const ConfigSection& handler_section = recipe.get(kHandlerFile).section(task);
      auto position = std::find(tasks.begin(), tasks.end(), task);
      auto masks = std::find(tasks.begin(), position, handler.task_for_masks);
      if (masks == position)
        problems.push_back(handler_section.where("task_for_masks") + ": task_for_masks = " +
                           handler.task_for_masks + " must be a test task before [" + task +
                           "] in [evaluator] tasks (its masks are used)");
    }
  }
  for (const auto& name : speaker_verification_scorer_names(section)) {
    SpeakerVerificationScorerOptions options;
    if (guard([&] { options = scorer_options(recipe, name, section); }) &&
        !is_none(options.load_trial_list) && !fs::exists(options.load_trial_list))
      problems.push_back(recipe.get(kScorerFile).section(name).where("load_trial_list") + ": '" +
                         options.load_trial_list + "' does not exist");
  }
  return problems;
}

EvaluationResult run_speaker_verification_test(
    const Recipe& recipe, Separator& model, const std::string& task, const fs::path& testdir,
    int64_t max_utterances, uint64_t seed,
    const std::map<std::string, SeparatedTaskRecord>& separated,
    const std::function<void(const std::string&)>& on_summary) {
  const ConfigSection& section = recipe.get("test_evaluator.cfg").section(task);
  const auto handler = handler_options(recipe, task);
  const SeparatedTaskRecord* masks_of = nullptr;
  std::unique_ptr<SectionReader> usedbins;
  if (handler.type == "attractor_from_embeddings") {
    auto found = separated.find(handler.task_for_masks);
    if (found == separated.end())
      throw ConfigError(recipe.get(kHandlerFile).section(task).where("task_for_masks") +
                        ": task " + handler.task_for_masks + " was not tested in this run before [" +
                        task + "]: its masks are needed (test both, " + handler.task_for_masks +
                        " first in [evaluator] tasks, without --task)");
    masks_of = &found->second;
    usedbins = std::make_unique<SectionReader>(recipe, handler.usedbins);
  }
  std::map<std::string, torch::Tensor> vectors;
  auto loss = model.evaluate_outputs(task, max_utterances, [&](const std::string& utterance,
                                                               const TensorMap& outputs) {
    auto v = speaker_vectors(handler, task, utterance, outputs, usedbins.get(), masks_of);
    if (v.size(0) != handler.nrs)
      throw DataError("speaker verification task " + task + ": utterance " + utterance + " has " +
                      std::to_string(v.size(0)) + " speaker vectors, nrs = " +
                      std::to_string(handler.nrs));
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
  spdlog::info("task {}: {} speaker vectors of {} utterances ({})", task,
               vectors.size() * handler.nrs, vectors.size(), handler.type);

  for (const auto& name : speaker_verification_scorer_names(section)) {
    const auto options = scorer_options(recipe, name, section);
    MixtureSpeakers speakers;
    for (const auto& file : recipe.get("database.conf").section(options.spkinfo).get_list("datafiles"))
      for (const auto& [utterance, list] : read_speaker_info(file))
        if (vectors.count(utterance)) speakers[utterance] = list;
    for (const auto& [utterance, v] : vectors)
      if (!speakers.count(utterance))
        throw DataError("speaker verification scorer [" + name + "]: utterance " + utterance +
                        " is not in the speaker info (" + options.spkinfo + ")");
    Trials trials = is_none(options.load_trial_list)
                        ? draw_trials(speakers, options.num_trials_per_mix_per_spk,
                                      options.only_competing_spk, options.gender_specific_trials,
                                      seed ^ stable_hash(name))
                        : load_trials(options.load_trial_list);
    std::vector<double> all_scores;
    std::vector<bool> all_targets;
    nlohmann::json complete = nlohmann::json::object();
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
          if (enrolment == vectors.end() || index < 0 || index >= enrolment->second.size(0))
            continue;
          auto a = own->second[static_cast<int64_t>(s)], b = enrolment->second[index];
          scores.push_back((a.dot(b) / (a.norm() * b.norm()).clamp_min(1e-12)).item<double>());
          targets.push_back(trials.targets.at(mixture)[s][k]);
        }
        if (options.mvn_score_per_mix_spk != "False" && !scores.empty()) {
          std::vector<double> basis;
          for (std::size_t k = 0; k < scores.size(); ++k)
            if (options.mvn_score_per_mix_spk == "all" || !targets[k]) basis.push_back(scores[k]);
          if (!basis.empty()) {
            double mean = std::accumulate(basis.begin(), basis.end(), 0.0) / basis.size(), var = 0;
            for (double x : basis) var += (x - mean) * (x - mean);
            const double deviation = std::sqrt(var / basis.size());
            for (double& x : scores) x = (x - mean) / (deviation > 0 ? deviation : 1.0);
          }
        }
        all_scores.insert(all_scores.end(), scores.begin(), scores.end());
        all_targets.insert(all_targets.end(), targets.begin(), targets.end());
        std::vector<int> labels(targets.begin(), targets.end());
        mixture_json.push_back({{"scores", scores}, {"target", labels}});
      }
      complete[mixture] = {{"score", mixture_json}};
    }
    if (all_scores.empty())
      throw DataError("speaker verification scorer [" + name + "]: no trials (" +
                      std::to_string(vectors.size()) + " tested utterances)");
    auto metrics = verification_metrics(all_scores, all_targets, options.p_target,
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
    write_file_atomic(testdir / (results + "_complete.json"), complete.dump(1) + "\n");
    if (options.store_trial_list && is_none(options.load_trial_list))
      write_file_atomic(testdir / ("trials_" + name + ".json"), trials_json(trials).dump() + "\n");
    if (options.make_figure) {
      // The detection trade-off per distinct score, as the original's figure shows it.
      std::string csv = "threshold,false_positive_rate,false_negative_rate\n";
      for (const auto& point : operating_points(all_scores, all_targets))
        csv += fmt::format("{:.6g},{:.6g},{:.6g}\n", point.threshold, point.false_alarm,
                           point.miss);
      write_file_atomic(testdir / ("det_" + name + ".csv"), csv);
    }
    const std::string line = fmt::format(
        "Result for eer (using {} {}): EER={:.2f}% (threshold={:.3f}), minDCF={:.4f} "
        "(p_target={}), {} target and {} non-target trials\n",
        options.score_type, name, 100 * metrics.eer, metrics.eer_threshold, metrics.min_dcf,
        options.p_target, metrics.targets, metrics.nontargets);
    if (on_summary)
      on_summary(line);
    else
      spdlog::info("{}", trim(line));
  }
  return loss;
}

}  // namespace nabu
