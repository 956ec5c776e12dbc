#include "nabu/evaluation/scorers/scorer.h"

#include <algorithm>
#include <limits>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/evaluation/scorers/bss_eval.h"

namespace nabu {

void ScorerOptions::declare(OptionsReader& r) {
  r("score_type", score_type, "scorer class(es), space separated");
  r("org_src", org_src, "database section(s) of the original source signals; required");
  r("base", base, "database section(s) of the unprocessed mixture (the baseline); required");
  r("spkinfo", spkinfo,
    "database section(s) whose datafiles list 'utt x id1 g1 id2 g2 ...' per line; required");
  r("nrs", nrs, "number of speakers to score; 0 = as many as there are references");
  r("noise", noise, "database section(s) of the noise signal (sdr_snr; required there)");
  r.require(!score_type.empty(), "score_type", "names no scorer");
  r.require(!trim(org_src).empty(), "org_src", "required: the original sources");
  r.require(!trim(base).empty(), "base", "required: the mixture");
  r.require(!trim(spkinfo).empty(), "spkinfo", "required: the speaker list");
  r.require(nrs >= 0, "nrs", "must not be negative");
}

const std::vector<std::string>& Scorer::scenarios() {
  static const std::vector<std::string> names{"SS", "base"};
  return names;
}

Scorer::Scorer(const ConfigSection& section, std::string type, std::vector<std::string> metrics)
    : type_(std::move(type)),
      options_(read_options<ScorerOptions>(section, "score_type " + type_)),
      metrics_(std::move(metrics)),
      where_(section.where()) {}

UtteranceScore Scorer::evaluate(const torch::Tensor& references, const torch::Tensor& estimates,
                                const torch::Tensor& mixture, const torch::Tensor& noise,
                                int sample_rate) const {
  if (needs_noise() && !noise.defined())
    throw Error(where_ + ": score_type " + type_ + " needs the noise signal (key noise)");
  if (needs_sample_rate() && sample_rate <= 0)
    throw Error(where_ + ": score_type " + type_ + " needs the signals' sample rate");
  if (!references.defined() || !estimates.defined() || !mixture.defined() ||
      references.dim() != 2 || estimates.dim() != 2)
    throw Error(where_ + ": score_type " + type_ +
                " expects references [S, N], estimates [S, N] and a mixture [N]");
  auto mix = mixture.reshape({-1});
  const int64_t speakers = references.size(0);
  if (options_.nrs > 0 && options_.nrs != speakers)
    throw Error(where_ + ": nrs = " + std::to_string(options_.nrs) + " but the utterance has " +
                std::to_string(speakers) + " reference signals");
  if (estimates.size(0) != speakers || estimates.size(1) != references.size(1) ||
      mix.size(0) != references.size(1))
    throw Error(where_ + ": " + std::to_string(estimates.size(0)) + " estimates of " +
                std::to_string(estimates.size(1)) + " samples and a mixture of " +
                std::to_string(mix.size(0)) + " samples do not match " +
                std::to_string(speakers) + " references of " +
                std::to_string(references.size(1)) + " samples");
  const torch::Tensor inputs[2] = {estimates, mix.unsqueeze(0).expand({speakers, -1})};
  UtteranceScore result;
  for (std::size_t s = 0; s < scenarios().size(); ++s) {
    std::vector<std::vector<double>> values;
    std::vector<int64_t> permutation;
    score_scenario(references, inputs[s], noise, sample_rate, values, permutation);
    for (std::size_t m = 0; m < metrics_.size(); ++m)
      result.values[metrics_[m]][scenarios()[s]] = values.at(m);
    result.permutation[scenarios()[s]] = permutation;
  }
  return result;
}

std::map<std::string, double> Scorer::score(const torch::Tensor& references,
                                            const torch::Tensor& estimates,
                                            const torch::Tensor& mixture,
                                            const torch::Tensor& noise, int sample_rate) const {
  auto detail = evaluate(references, estimates, mixture, noise, sample_rate);
  auto mean = [](const std::vector<double>& values) {
    double sum = 0.0;
    for (double v : values) sum += v;
    return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
  };
  std::map<std::string, double> averages;
  for (const auto& metric : metrics_) {
    double estimated = mean(detail.values[metric]["SS"]);
    double baseline = mean(detail.values[metric]["base"]);
    averages[metric] = estimated;
    averages[metric + "_base"] = baseline;
    averages[metric + "i"] = estimated - baseline;  // docs/postprocessing.md: improvement = SS - base
  }
  return averages;
}

std::vector<double> signal_samples(const torch::Tensor& signal) {
  const auto contiguous = signal.to(torch::kFloat64).contiguous();
  return {contiguous.data_ptr<double>(), contiguous.data_ptr<double>() + contiguous.numel()};
}

double mean_of_best_assignment(
    const torch::Tensor& references, const torch::Tensor& estimates,
    const std::function<double(const std::vector<double>&, const std::vector<double>&)>&
        pair_score) {
  const int64_t speakers = references.size(0);
  std::vector<std::vector<double>> scores(speakers, std::vector<double>(speakers));
  for (int64_t r = 0; r < speakers; ++r)
    for (int64_t e = 0; e < speakers; ++e)
      scores[r][e] = pair_score(signal_samples(references[r]), signal_samples(estimates[e]));
  const auto permutation = best_permutation(scores);
  double total = 0;
  for (int64_t r = 0; r < speakers; ++r) total += scores[r][permutation[r]];
  return total / static_cast<double>(speakers);
}

void PairScorer::score_scenario(const torch::Tensor& references, const torch::Tensor& estimates,
                                const torch::Tensor&, int sample_rate,
                                std::vector<std::vector<double>>& values,
                                std::vector<int64_t>& permutation) const {
  const int64_t speakers = references.size(0);
  const auto refs = references.to(torch::kFloat64);
  const auto ests = estimates.to(torch::kFloat64);
  // The baseline repeats the mixture: every pairing is the same, one score per speaker.
  const bool repeated = speakers > 1 && ests.eq(ests[0].unsqueeze(0)).all().item<bool>();
  // scores[r][e]: the metrics of estimate e against reference r.
  std::vector<std::vector<std::vector<double>>> scores(speakers,
                                                       std::vector<std::vector<double>>(speakers));
  for (int64_t r = 0; r < speakers; ++r)
    for (int64_t e = 0; e < speakers; ++e)
      if (!repeated || e == r) scores[r][e] = score_pair(refs[r], ests[e], sample_rate);
  std::vector<int64_t> best(speakers);
  for (int64_t s = 0; s < speakers; ++s) best[s] = s;
  if (!repeated) {
    std::vector<std::vector<double>> first(speakers, std::vector<double>(speakers));
    for (int64_t r = 0; r < speakers; ++r)
      for (int64_t e = 0; e < speakers; ++e) first[r][e] = scores[r][e].front();
    best = best_permutation(first);
  }
  permutation = best;
  values.assign(metrics().size(), std::vector<double>(speakers));
  for (int64_t r = 0; r < speakers; ++r)
    for (std::size_t m = 0; m < metrics().size(); ++m) values[m][r] = scores[r][best[r]][m];
}

namespace {

class SdrScorer : public Scorer {
 public:
  explicit SdrScorer(const ConfigSection& section) : Scorer(section, "sdr", {"SDR", "SIR", "SAR"}) {}

 protected:
  void score_scenario(const torch::Tensor& references, const torch::Tensor& estimates,
                      const torch::Tensor&, int, std::vector<std::vector<double>>& values,
                      std::vector<int64_t>& permutation) const override {
    auto scores = bss_eval_sources(references, estimates, 512);
    values = {scores.sdr, scores.sir, scores.sar};
    permutation = scores.perm;
  }
};

class SiSdrScorer : public Scorer {
 public:
  explicit SiSdrScorer(const ConfigSection& section)
      : Scorer(section, "si_sdr", {"SI-SDR", "SI-SIR", "SI-SAR"}) {}

 protected:
  void score_scenario(const torch::Tensor& references, const torch::Tensor& estimates,
                      const torch::Tensor&, int, std::vector<std::vector<double>>& values,
                      std::vector<int64_t>& permutation) const override {
    auto scores = si_sdr_sources(references, estimates);
    values = {scores.sdr, scores.sir, scores.sar};
    permutation = scores.perm;
  }
};

// The original's sdr_snr: BSS Eval with the noise as one more signal to project on, so the error
// splits into interference, noise and artifacts (bss_eval.h).
class SdrSnrScorer : public Scorer {
 public:
  explicit SdrSnrScorer(const ConfigSection& section)
      : Scorer(section, "sdr_snr", {"SDR", "SIR", "SNR", "SAR"}) {
    if (trim(options().noise).empty())
      section.fail("noise", "required for score_type sdr_snr: the section of the noise signal");
  }
  bool needs_noise() const override { return true; }

 protected:
  void score_scenario(const torch::Tensor& references, const torch::Tensor& estimates,
                      const torch::Tensor& noise, int, std::vector<std::vector<double>>& values,
                      std::vector<int64_t>& permutation) const override {
    auto scores = bss_eval_sources_with_noise(references, estimates, noise, 512);
    values = {scores.sdr, scores.sir, scores.snr, scores.sar};
    permutation = scores.perm;
  }
};

template <class T>
ScorerPtr make(const ConfigSection& section) {
  return std::make_shared<T>(section);
}

}  // namespace

ScorerRegistry& scorer_registry() {
  static ScorerRegistry registry("score_type");
  return registry;
}

std::vector<ScorerPtr> make_scorers(const ConfigSection& section) {
  auto types = split_whitespace(section.get_string("score_type"));
  if (types.empty()) section.fail("score_type", "names no scorer");
  std::vector<ScorerPtr> scorers;
  for (const auto& type : types) {
    if (!scorer_registry().contains(type))
      section.fail("score_type", scorer_registry().unknown_message(type));
    scorers.push_back(scorer_registry().create(type, section));
  }
  return scorers;
}

NABU_REGISTER_WITH_OPTIONS(scorer_registry, "sdr", make<SdrScorer>, ScorerOptions,
                           "BSS Eval v3 SDR, SIR, SAR (mir_eval, 512-tap filter) and improvements")
NABU_REGISTER_WITH_OPTIONS(scorer_registry, "sdr_snr", make<SdrSnrScorer>, ScorerOptions,
                           "sdr with a noise reference: SDR, SIR, SNR, SAR and improvements "
                           "(key noise)")
NABU_REGISTER_WITH_OPTIONS(scorer_registry, "si_sdr", make<SiSdrScorer>, ScorerOptions,
                           "scale-invariant SDR (zero-mean), SI-SIR, SI-SAR and improvements")
NABU_REGISTER_WITH_OPTIONS(scorer_registry, "stoi",
                           [](const ConfigSection& s) { return make_stoi_scorer(s, false); },
                           ScorerOptions,
                           "short-time objective intelligibility (Taal et al. 2011), 0..1, and "
                           "its improvement over the mixture")
NABU_REGISTER_WITH_OPTIONS(scorer_registry, "estoi",
                           [](const ConfigSection& s) { return make_stoi_scorer(s, true); },
                           ScorerOptions,
                           "extended STOI (Jensen & Taal 2016), 0..1, and its improvement over "
                           "the mixture")
NABU_REGISTER_WITH_OPTIONS(scorer_registry, "pesq", make_pesq_scorer, ScorerOptions,
                           "perceptual speech quality, MOS-LQO 1..4.6: narrow band (ITU-T "
                           "P.862 + P.862.1) at 8 kHz, wide band (P.862.2) at 16 kHz")

}  // namespace nabu
