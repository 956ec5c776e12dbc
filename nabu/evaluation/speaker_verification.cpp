#include "nabu/evaluation/speaker_verification.h"

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
#include "nabu/evaluation/scorers/score_summary.h"
#include "nabu/experiment/trained_experiment.h"
#include "nabu/processing/section_reader.h"

namespace nabu {

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

SpeakerVerificationHandlerOptions speaker_verification_handler_options(const Recipe& recipe,
                                                                       const std::string& task) {
  const ConfigFile* file = recipe.find(kSpeakerVerificationHandlerFile);
  if (!file)
    throw ConfigError(recipe.dir().string() + ": test task [" + task +
                      "] is a speaker_verification task but the recipe has no " +
                      kSpeakerVerificationHandlerFile);
  const ConfigSection* section = file->find_section(task);
  if (!section)
    throw ConfigError(file->path() + ": no section [" + task +
                      "] for the speaker_verification test task" +
                      did_you_mean(task, file->section_names()));
  return read_options<SpeakerVerificationHandlerOptions>(*section, kSpeakerVerificationHandlerFile);
}

SpeakerVerificationScorerOptions speaker_verification_scorer_options(const Recipe& recipe,
                                                                     const std::string& name,
                                                                     const ConfigSection& task) {
  const ConfigFile* file = recipe.find(kSpeakerVerificationScorerFile);
  if (!file)
    throw ConfigError(task.where("scorers_names") + ": [" + task.name() +
                      "] is scored by speaker_verification_scorer.cfg, which the recipe lacks");
  const ConfigSection* section = file->find_section(name);
  if (!section)
    throw ConfigError(file->path() + ": no section [" + name + "] (scorers_names of [" +
                      task.name() + "])" + did_you_mean(name, file->section_names()));
  auto options =
      read_options<SpeakerVerificationScorerOptions>(*section, kSpeakerVerificationScorerFile);
  if (options.mvn_score_per_mix_spk == "True") options.mvn_score_per_mix_spk = "all";
  return options;
}

std::vector<std::string> tasks_read_for_masks(const Recipe& recipe,
                                              const std::vector<std::string>& tasks) {
  std::vector<std::string> out;
  const ConfigFile& test_cfg = recipe.get("test_evaluator.cfg");
  const ConfigFile* handlers = recipe.find(kSpeakerVerificationHandlerFile);
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
  if (guard([&] { handler = speaker_verification_handler_options(recipe, task); })) {
    if (handler.type == "attractor_from_embeddings") {
      const ConfigSection& handler_section =
          recipe.get(kSpeakerVerificationHandlerFile).section(task);
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
    if (guard([&] { options = speaker_verification_scorer_options(recipe, name, section); }) &&
        options.loads_trials() && !fs::exists(options.load_trial_list))
      problems.push_back(
          recipe.get(kSpeakerVerificationScorerFile).section(name).where("load_trial_list") +
          ": '" + options.load_trial_list + "' does not exist");
  }
  return problems;
}

}  // namespace nabu
