#include "nabu/evaluation/decoders/ctc_decoding.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "nabu/core/error.h"

namespace nabu {

namespace {

constexpr double kLogZero = -std::numeric_limits<double>::infinity();

double log_add(double a, double b) {
  if (a == kLogZero) return b;
  if (b == kLogZero) return a;
  const double larger = std::max(a, b);
  return larger + std::log1p(std::exp(std::min(a, b) - larger));
}

// Checks the arguments shared by both decoders and returns a contiguous CPU double copy.
torch::Tensor checked_log_probs(const torch::Tensor& log_probs, int64_t blank, const char* what) {
  if (!log_probs.defined() || log_probs.dim() != 2)
    throw Error(std::string(what) + ": expected log_probs of shape [T, C]");
  const int64_t num_classes = log_probs.size(1);
  if (num_classes < 2)
    throw Error(std::string(what) + ": expected at least 2 classes (a blank and a label), got " +
                std::to_string(num_classes));
  if (blank < 0 || blank >= num_classes)
    throw Error(std::string(what) + ": blank " + std::to_string(blank) + " outside [0, " +
                std::to_string(num_classes) + ")");
  return log_probs.to(torch::kCPU, torch::kFloat64).contiguous();
}

// Log-probabilities of the frame paths kept for one prefix, split by their last frame: ending in
// blank or in the prefix's last label. The split decides whether a repeated label extends the
// prefix (only after a blank) or merges into its last label.
struct PrefixScores {
  double blank_ending = kLogZero;
  double label_ending = kLogZero;
  double total() const { return log_add(blank_ending, label_ending); }
};

using Beam = std::map<std::vector<int64_t>, PrefixScores>;  // ordered: results do not depend on hashing

// Adds `log_probability` to one side of `prefix`; impossible paths create no entry, so every
// prefix in the beam has a nonzero probability.
void add(Beam& beam, const std::vector<int64_t>& prefix, bool blank_ending, double log_probability) {
  if (log_probability == kLogZero) return;
  PrefixScores& scores = beam[prefix];
  double& side = blank_ending ? scores.blank_ending : scores.label_ending;
  side = log_add(side, log_probability);
}

// Prefixes ordered best first; equal probabilities fall back to the labels so the order is total.
std::vector<std::pair<std::vector<int64_t>, PrefixScores>> best_first(const Beam& beam) {
  std::vector<std::pair<std::vector<int64_t>, PrefixScores>> ranked(beam.begin(), beam.end());
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.second.total() > b.second.total();
  });
  return ranked;
}

}  // namespace

std::vector<int64_t> ctc_greedy_decode(const torch::Tensor& log_probs, int64_t blank) {
  const auto scores = checked_log_probs(log_probs, blank, "ctc_greedy_decode");
  const auto frames = scores.accessor<double, 2>();
  const int64_t num_classes = scores.size(1);

  std::vector<int64_t> labels;
  int64_t previous = blank;
  for (int64_t t = 0; t < scores.size(0); ++t) {
    int64_t best = 0;
    for (int64_t c = 1; c < num_classes; ++c)
      if (frames[t][c] > frames[t][best]) best = c;
    if (best != blank && best != previous) labels.push_back(best);
    previous = best;
  }
  return labels;
}

std::vector<CtcHypothesis> ctc_prefix_beam_search(const torch::Tensor& log_probs, int64_t blank,
                                                  int beam_width) {
  const auto scores = checked_log_probs(log_probs, blank, "ctc_prefix_beam_search");
  if (beam_width < 1)
    throw Error("ctc_prefix_beam_search: beam_width must be >= 1, got " +
                std::to_string(beam_width));
  const auto frames = scores.accessor<double, 2>();
  const int64_t num_classes = scores.size(1);

  Beam beam;
  beam[{}].blank_ending = 0.0;  // before any frame: the empty prefix with probability 1
  std::vector<int64_t> extended;
  for (int64_t t = 0; t < scores.size(0); ++t) {
    Beam next;
    for (const auto& [prefix, prefix_scores] : beam) {
      const double total = prefix_scores.total();
      for (int64_t c = 0; c < num_classes; ++c) {
        const double frame = frames[t][c];
        if (c == blank) {
          add(next, prefix, true, total + frame);
          continue;
        }
        extended = prefix;
        extended.push_back(c);
        if (!prefix.empty() && c == prefix.back()) {
          // A repeat merges into the last label unless a blank separates the two.
          add(next, prefix, false, prefix_scores.label_ending + frame);
          add(next, extended, false, prefix_scores.blank_ending + frame);
        } else {
          add(next, extended, false, total + frame);
        }
      }
    }
    beam.clear();
    const auto ranked = best_first(next);
    for (size_t i = 0; i < ranked.size() && i < static_cast<size_t>(beam_width); ++i)
      beam.insert(ranked[i]);
  }

  std::vector<CtcHypothesis> hypotheses;
  for (const auto& [labels, prefix_scores] : best_first(beam))
    hypotheses.push_back({labels, prefix_scores.total()});
  return hypotheses;
}

}  // namespace nabu
