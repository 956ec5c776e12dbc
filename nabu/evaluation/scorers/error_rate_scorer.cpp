// score_type = error_rate: the edit distance of the hypotheses to the references (edit_distance.h),
// summed over the utterances so that every reference label weighs once.
#include <fmt/format.h>

#include "nabu/evaluation/scorers/edit_distance.h"
#include "nabu/evaluation/scorers/sequence_scorer.h"

namespace nabu {

namespace {

struct ErrorRateScorerOptions : SequenceScorerOptions {
  std::string unit = "label";
  void declare(OptionsReader& r) {
    SequenceScorerOptions::declare(r);
    r("unit", unit, "what a label is (phone, word, character): names the rate");
  }
};

// "PER" for phones, "WER" for words, "CER" for characters, else "<unit> error rate".
std::string rate_name(const std::string& unit) {
  if (unit == "phone") return "PER";
  if (unit == "word") return "WER";
  if (unit == "character" || unit == "char") return "CER";
  return unit + " error rate";
}

class ErrorRateScorer : public SequenceScorer {
 public:
  explicit ErrorRateScorer(const ConfigSection& section)
      : options_(read_options<ErrorRateScorerOptions>(section, "error_rate")) {}
  const SequenceScorerOptions& options() const override { return options_; }

  nlohmann::json add(const std::vector<std::string>& reference,
                     const std::vector<std::string>& hypothesis) override {
    auto counts = align_edits(reference, hypothesis);
    total_ += counts;
    ++utterances_;
    return {{"reference_length", counts.reference_length},
            {"substitutions", counts.substitutions},
            {"deletions", counts.deletions},
            {"insertions", counts.insertions},
            {"error_rate", counts.rate()}};
  }

  nlohmann::json summary() const override {
    return {{"unit", options_.unit},
            {"utterances", utterances_},
            {"reference_length", total_.reference_length},
            {"substitutions", total_.substitutions},
            {"deletions", total_.deletions},
            {"insertions", total_.insertions},
            {"error_rate", total_.rate()}};
  }

  std::string summary_line(const std::string& decoder) const override {
    return fmt::format("{} ({} decoding): {:.2f} % over {} {}s of {} utterances "
                       "(substitutions {}, deletions {}, insertions {})",
                       rate_name(options_.unit), decoder, 100.0 * total_.rate(),
                       total_.reference_length, options_.unit, utterances_,
                       total_.substitutions, total_.deletions, total_.insertions);
  }

 private:
  ErrorRateScorerOptions options_;
  EditCounts total_;
  int64_t utterances_ = 0;
};

SequenceScorerPtr make_error_rate(const ConfigSection& section) {
  return std::make_shared<ErrorRateScorer>(section);
}

}  // namespace

NABU_REGISTER_WITH_OPTIONS(sequence_scorer_registry, "error_rate", make_error_rate,
                           ErrorRateScorerOptions,
                           "recognition tasks: Levenshtein edit distance of the decoded labels to "
                           "the references (substitutions, deletions, insertions) and the rate "
                           "(PER, WER, CER by unit)")

}  // namespace nabu
