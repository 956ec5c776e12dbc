// Collects per-utterance scores and builds the original's results files (docs/postprocessing.md,
// scorer.py):   results_<task>_<score_type>_complete.json  {utt: {"score": {metric: {scenario: [per
// speaker]},                                                          "perm": {scenario: [...]}},
//                                                "spk_info": {"ids", "genders", "mix_type"}}}
//   results_<task>_<score_type>_summary.json   {metric: {scenario: {group: {mean, std, median}}}}
// with group in all, all_m, all_f, same_gen, diff_gen. Each utterance counts once, with its
// scores averaged over its speakers. Non-finite numbers (an empty group's mean, an infinite SDR)
// are written as JSON null: standard JSON has no NaN/Infinity (Python's json writes them anyway).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "nabu/evaluation/scorers/scorer.h"

namespace nabu {

// utterance -> (speaker id, gender) per speaker.
using SpeakerInfo = std::map<std::string, std::vector<std::pair<std::string, std::string>>>;

// Reads a spkinfo file: lines "utt <ignored> id1 g1 id2 g2 ..." (docs/postprocessing.md). Blank
// lines are skipped; a later line for the same utterance wins. Errors name file:line.
SpeakerInfo read_speaker_info(const std::filesystem::path& file);

class ScoreSummary {
 public:
  static const std::vector<std::string>& mix_types();  // all_m, all_f, same_gen, diff_gen

  // `metrics`: the scorer's summarised metrics (Scorer::metrics()).
  ScoreSummary(std::vector<std::string> metrics, SpeakerInfo speakers);

  // Records an utterance (replacing an earlier score of the same name). Throws Error when the
  // utterance is not in the speaker info or lists fewer speakers than were scored.
  void add(const std::string& utterance, const UtteranceScore& score);
  std::size_t size() const { return results_.size(); }
  bool contains(const std::string& utterance) const { return results_.count(utterance) > 0; }

  nlohmann::json complete_json() const;
  nlohmann::json summary_json() const;
  // A compact table: per metric the mean of the estimates, of the mixtures and the improvement,
  // over all mixtures and over the same- and different-gender ones where genders are known.
  // `unit`: the metrics' ("dB": two decimals; empty: a 0..1 score, three).
  std::string summary_text(const std::string& scorer_name, const std::string& unit = "dB") const;
  // Per utterance, with the first metric's improvement (separated minus mixture, its mean over
  // the speakers), lowest first: the utterances worth listening to.
  std::vector<std::pair<std::string, double>> by_improvement() const;
  // results_<task>_<type>_utterances.csv: one row per utterance in by_improvement() order:
  // utterance, mixture kind (same_gen, diff_gen or unknown), speakers, per metric the separated
  // and mixture means and the improvement, then `files` (the mixture's and the separated wavs).
  std::string utterances_csv(const std::map<std::string, std::vector<std::string>>& files) const;
  // The `count` lowest rows of by_improvement() as lines for the console, each with the first of
  // its files (the mixture); the separated ones are in the CSV.
  std::string worst_text(std::size_t count,
                         const std::map<std::string, std::vector<std::string>>& files,
                         const std::string& unit = "dB") const;
  // Restores the utterances of a complete JSON written earlier (resuming from a checkpoint).
  void load_complete_json(const nlohmann::json& complete);

 private:
  struct Entry {
    UtteranceScore score;
    std::vector<std::string> ids, genders;
    std::map<std::string, bool> mix_type;
  };
  std::vector<double> utterance_means(const std::string& metric, const std::string& scenario,
                                      const std::string& group) const;
  // One utterance's values (per speaker) of a metric in a scenario; null when not scored.
  static const std::vector<double>* entry_values(const Entry& entry, const std::string& metric,
                                                 const std::string& scenario);
  // The mean over the speakers of one utterance's metric in a scenario (NaN when not scored).
  static double entry_mean(const Entry& entry, const std::string& metric,
                           const std::string& scenario);

  std::vector<std::string> metrics_;
  SpeakerInfo speakers_;
  std::map<std::string, Entry> results_;
};

}  // namespace nabu
