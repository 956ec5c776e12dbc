// Scorers compare the reconstructed signals of one utterance with the original sources, and the
// unprocessed mixture with the same sources as the baseline (docs/postprocessing.md). One class per
// scorer.cfg `score_type`, built from its task section through scorer_registry(). Reading the
// signals (org_src, base) and the speaker list (spkinfo) is the caller's job; ScoreSummary
// (score_summary.h) collects the per-utterance scores into the original's results JSON.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nabu/core/assignment.h"
#include "nabu/core/config.h"
#include "nabu/core/options.h"
#include "nabu/core/registry.h"

namespace nabu {

struct ScorerOptions {
  std::vector<std::string> score_type;  // one or more scorer names
  std::string org_src;  // database section(s) of the original sources (required)
  std::string base;     // database section(s) of the mixture (required)
  std::string spkinfo;  // database section(s) whose datafiles list the speakers (required)
  std::string noise;    // database section(s) of the noise signal (sdr_snr)
  int nrs = 0;          // number of speakers; 0 = as many as the references
  void declare(OptionsReader& r);
};

// The scores of one utterance: metric -> scenario ("SS" for the estimates, "base" for the
// mixture) -> one value per reference speaker; and the matching permutation per scenario.
struct UtteranceScore {
  std::map<std::string, std::map<std::string, std::vector<double>>> values;
  std::map<std::string, std::vector<int64_t>> permutation;
};

class Scorer {
 public:
  virtual ~Scorer() = default;

  const std::string& type() const { return type_; }
  const ScorerOptions& options() const { return options_; }
  // The metrics that are summarised, in order (e.g. SDR, SIR, SAR).
  const std::vector<std::string>& metrics() const { return metrics_; }
  // The scenarios, estimates first, as the original: {"SS", "base"}.
  static const std::vector<std::string>& scenarios();

  // references [S, N], estimates [S, N], mixture [N] or [1, N]; all the same length N (the
  // original scores signals of one snip). The mixture is duplicated S times as the baseline.
  // `noise` [N]: the noise signal, for scorers that need_noise(). `sample_rate`: the signals'
  // rate in Hz, for scorers that need it (stoi, estoi); 0 = unknown.
  UtteranceScore evaluate(const torch::Tensor& references, const torch::Tensor& estimates,
                          const torch::Tensor& mixture, const torch::Tensor& noise = {},
                          int sample_rate = 0) const;
  virtual bool needs_noise() const { return false; }
  virtual bool needs_sample_rate() const { return false; }
  // The unit of the metrics ("dB"; empty for a score such as STOI).
  virtual std::string unit() const { return "dB"; }

  // Per utterance averages over the speakers: for every metric M, "M" (estimates), "M_base"
  // (mixture) and the improvement "Mi" = M - M_base (so SDR, SDR_base, SDRi, ...).
  std::map<std::string, double> score(const torch::Tensor& references,
                                      const torch::Tensor& estimates,
                                      const torch::Tensor& mixture,
                                      const torch::Tensor& noise = {},
                                      int sample_rate = 0) const;

 protected:
  Scorer(const ConfigSection& section, std::string type, std::vector<std::string> metrics);
  // Scores of `estimates` [S, N] against `references` [S, N] (and `noise` [N] or undefined; the
  // rate, or 0), one list per metric, plus the permutation.
  virtual void score_scenario(const torch::Tensor& references, const torch::Tensor& estimates,
                              const torch::Tensor& noise, int sample_rate,
                              std::vector<std::vector<double>>& values,
                              std::vector<int64_t>& permutation) const = 0;

 private:
  std::string type_;
  ScorerOptions options_;
  std::vector<std::string> metrics_;
  std::string where_;
};

// The samples of a signal [N] as doubles.
std::vector<double> signal_samples(const torch::Tensor& signal);

// The mean over the speakers of `pair_score(reference, estimate)`, the estimates [S, N] assigned
// to the references [S, N] by the highest mean (the validation metrics stoi, estoi, pesq).
double mean_of_best_assignment(
    const torch::Tensor& references, const torch::Tensor& estimates,
    const std::function<double(const std::vector<double>&, const std::vector<double>&)>&
        pair_score);

// A scorer of single pairs (reference, estimate) of one metric each, given a function of the two:
// the permutation of the estimates is the one of the highest mean over the speakers.
class PairScorer : public Scorer {
 protected:
  PairScorer(const ConfigSection& section, std::string type, std::vector<std::string> metrics)
      : Scorer(section, std::move(type), std::move(metrics)) {}
  // Every metric of estimate `estimate` against `reference`, both double [N].
  virtual std::vector<double> score_pair(const torch::Tensor& reference,
                                         const torch::Tensor& estimate,
                                         int sample_rate) const = 0;
  void score_scenario(const torch::Tensor& references, const torch::Tensor& estimates,
                      const torch::Tensor& noise, int sample_rate,
                      std::vector<std::vector<double>>& values,
                      std::vector<int64_t>& permutation) const override;
};

using ScorerPtr = std::shared_ptr<Scorer>;
using ScorerRegistry = Registry<ScorerPtr, const ConfigSection&>;
// score_type stoi (extended: estoi), evaluation/scorers/stoi.cpp.
ScorerPtr make_stoi_scorer(const ConfigSection& section, bool extended);
// score_type pesq, evaluation/scorers/pesq.cpp.
ScorerPtr make_pesq_scorer(const ConfigSection& section);
ScorerRegistry& scorer_registry();

// The scorers named by the section's `score_type` (a space-separated list, as the original).
std::vector<ScorerPtr> make_scorers(const ConfigSection& section);

}  // namespace nabu
