// CTC greedy and prefix beam search decoding, checked against exhaustive path enumeration; the
// Levenshtein error counts, checked against a plain recursive minimum.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "nabu/core/error.h"
#include "nabu/postprocessing/decoders/ctc_decoding.h"
#include "nabu/postprocessing/scorers/edit_distance.h"

namespace {

using namespace nabu;
using Labels = std::vector<int64_t>;

// Log-softmax of a frame per path entry that strongly favours that label.
torch::Tensor peaked(const Labels& path, int64_t num_classes) {
  auto logits = torch::zeros({static_cast<int64_t>(path.size()), num_classes}, torch::kFloat64);
  for (size_t t = 0; t < path.size(); ++t) logits[t][path[t]] = 5.0;
  return torch::log_softmax(logits, 1);
}

torch::Tensor random_log_probs(int64_t frames, int64_t num_classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.5);
  std::vector<double> logits(frames * num_classes);
  for (double& x : logits) x = normal(rng);
  return torch::log_softmax(torch::tensor(logits, torch::kFloat64).reshape({frames, num_classes}), 1);
}

Labels collapse(const Labels& path, int64_t blank) {
  Labels labels;
  int64_t previous = blank;
  for (int64_t c : path) {
    if (c != blank && c != previous) labels.push_back(c);
    previous = c;
  }
  return labels;
}

double log_add(double a, double b) {
  if (a == -std::numeric_limits<double>::infinity()) return b;
  const double larger = std::max(a, b);
  return larger + std::log(std::exp(a - larger) + std::exp(b - larger));
}

// Every one of the C^T frame paths: the summed log-probability of each collapsed label sequence,
// and the most probable single path.
struct Exhaustive {
  std::map<Labels, double> sequences;
  Labels best_path;
};

Exhaustive enumerate_paths(const torch::Tensor& log_probs, int64_t blank) {
  const int64_t frames = log_probs.size(0), num_classes = log_probs.size(1);
  const auto scores = log_probs.accessor<double, 2>();
  int64_t num_paths = 1;
  for (int64_t t = 0; t < frames; ++t) num_paths *= num_classes;

  Exhaustive result;
  double best_path_score = -std::numeric_limits<double>::infinity();
  for (int64_t index = 0; index < num_paths; ++index) {
    Labels path(frames);
    double score = 0.0;
    for (int64_t t = 0, rest = index; t < frames; ++t, rest /= num_classes) {
      path[t] = rest % num_classes;
      score += scores[t][path[t]];
    }
    const Labels labels = collapse(path, blank);
    auto found = result.sequences.find(labels);
    if (found == result.sequences.end())
      result.sequences[labels] = score;
    else
      found->second = log_add(found->second, score);
    if (score > best_path_score) {
      best_path_score = score;
      result.best_path = path;
    }
  }
  return result;
}

struct RandomCase {
  int64_t frames, num_classes, blank;
  uint64_t seed;
};

std::vector<RandomCase> random_cases() {
  std::vector<RandomCase> cases;
  for (int64_t frames = 1; frames <= 5; ++frames)
    for (int64_t num_classes = 2; num_classes <= 4; ++num_classes)
      for (uint64_t seed = 0; seed < 4; ++seed)
        for (int64_t blank : {int64_t{0}, num_classes - 1})
          cases.push_back({frames, num_classes, blank, seed * 100 + frames * 10 + num_classes});
  return cases;
}

std::string describe(const RandomCase& c) {
  std::ostringstream text;
  text << "T=" << c.frames << " C=" << c.num_classes << " blank=" << c.blank << " seed=" << c.seed;
  return text.str();
}

TEST(CtcDecoding, GreedyMergesRepeatsAndDropsBlanks) {
  EXPECT_EQ(ctc_greedy_decode(peaked({1, 1, 2, 2, 0, 0, 1}, 3), 0), (Labels{1, 2, 1}));
  EXPECT_EQ(ctc_greedy_decode(peaked({0, 0, 0}, 3), 0), Labels{});
}

TEST(CtcDecoding, GreedyKeepsRepeatsSeparatedByBlank) {
  EXPECT_EQ(ctc_greedy_decode(peaked({1, 1, 0, 1}, 2), 0), (Labels{1, 1}));
  // Blank as the last class, and float input.
  EXPECT_EQ(ctc_greedy_decode(peaked({0, 2, 0, 0, 1}, 3).to(torch::kFloat32), 2), (Labels{0, 0, 1}));
}

TEST(CtcDecoding, EmptyUtterance) {
  const auto nothing = torch::empty({0, 3}, torch::kFloat64);
  EXPECT_EQ(ctc_greedy_decode(nothing, 0), Labels{});
  const auto beam = ctc_prefix_beam_search(nothing, 0, 4);
  ASSERT_EQ(beam.size(), 1u);
  EXPECT_EQ(beam[0].labels, Labels{});
  EXPECT_EQ(beam[0].log_probability, 0.0);
}

TEST(CtcDecoding, BeamSearchSumsPathsThatGreedyMisses) {
  // Two frames with p(a) = 0.4, p(blank) = 0.6: the best path is blank blank (0.36), but "a" has
  // the paths a a, a _, _ a (0.16 + 0.24 + 0.24 = 0.64).
  const auto log_probs = torch::log(torch::tensor({{0.6, 0.4}, {0.6, 0.4}}, torch::kFloat64));
  EXPECT_EQ(ctc_greedy_decode(log_probs, 0), Labels{});
  const auto beam = ctc_prefix_beam_search(log_probs, 0, 2);
  ASSERT_EQ(beam.size(), 2u);
  EXPECT_EQ(beam[0].labels, Labels{1});
  EXPECT_NEAR(beam[0].log_probability, std::log(0.64), 1e-12);
  EXPECT_EQ(beam[1].labels, Labels{});
  EXPECT_NEAR(beam[1].log_probability, std::log(0.36), 1e-12);
}

TEST(CtcDecoding, WideBeamEqualsExhaustiveSum) {
  for (const auto& c : random_cases()) {
    SCOPED_TRACE(describe(c));
    const auto log_probs = random_log_probs(c.frames, c.num_classes, c.seed);
    const auto exact = enumerate_paths(log_probs, c.blank);
    const int beam_width = static_cast<int>(std::pow(c.num_classes, c.frames));
    const auto beam = ctc_prefix_beam_search(log_probs, c.blank, beam_width);

    // Exact: every label sequence with its total probability, best first.
    ASSERT_EQ(beam.size(), exact.sequences.size());
    double best = -std::numeric_limits<double>::infinity();
    for (const auto& [labels, log_probability] : exact.sequences)
      if (log_probability > best) best = log_probability;
    EXPECT_NEAR(beam[0].log_probability, best, 1e-9);
    EXPECT_NEAR(exact.sequences.at(beam[0].labels), best, 1e-9);
    for (size_t k = 0; k < beam.size(); ++k) {
      ASSERT_EQ(exact.sequences.count(beam[k].labels), 1u);
      EXPECT_NEAR(beam[k].log_probability, exact.sequences.at(beam[k].labels), 1e-9);
      if (k > 0) {
        EXPECT_GE(beam[k - 1].log_probability, beam[k].log_probability);
      }
    }
  }
}

TEST(CtcDecoding, NarrowBeamGivesPossibleSequences) {
  for (const auto& c : random_cases()) {
    SCOPED_TRACE(describe(c));
    const auto log_probs = random_log_probs(c.frames, c.num_classes, c.seed);
    const auto exact = enumerate_paths(log_probs, c.blank);
    for (int beam_width : {1, 2, 3}) {
      const auto beam = ctc_prefix_beam_search(log_probs, c.blank, beam_width);
      ASSERT_GE(beam.size(), 1u);
      ASSERT_LE(beam.size(), static_cast<size_t>(beam_width));
      for (const auto& hypothesis : beam) {
        // A real label sequence, scored with a subset of its paths: at most its true probability.
        ASSERT_EQ(exact.sequences.count(hypothesis.labels), 1u);
        EXPECT_LE(hypothesis.log_probability, exact.sequences.at(hypothesis.labels) + 1e-9);
      }
    }
  }
}

TEST(CtcDecoding, GreedyIsTheMostProbablePath) {
  for (const auto& c : random_cases()) {
    SCOPED_TRACE(describe(c));
    const auto log_probs = random_log_probs(c.frames, c.num_classes, c.seed);
    const auto exact = enumerate_paths(log_probs, c.blank);
    EXPECT_EQ(ctc_greedy_decode(log_probs, c.blank), collapse(exact.best_path, c.blank));
  }
}

TEST(CtcDecoding, RejectsBadInput) {
  const auto log_probs = random_log_probs(3, 4, 1);
  EXPECT_THROW(ctc_greedy_decode(log_probs[0], 0), Error);
  EXPECT_THROW(ctc_prefix_beam_search(log_probs[0], 0, 2), Error);
  EXPECT_THROW(ctc_greedy_decode(log_probs, 4), Error);
  EXPECT_THROW(ctc_greedy_decode(log_probs, -1), Error);
  EXPECT_THROW(ctc_prefix_beam_search(log_probs, 4, 2), Error);
  EXPECT_THROW(ctc_prefix_beam_search(log_probs, 0, 0), Error);
  EXPECT_THROW(ctc_greedy_decode(torch::zeros({3, 1}, torch::kFloat64), 0), Error);
  EXPECT_THROW(ctc_greedy_decode(torch::Tensor(), 0), Error);
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream stream(text);
  std::vector<std::string> tokens;
  for (std::string token; stream >> token;) tokens.push_back(token);
  return tokens;
}

EditCounts edits(const std::string& reference, const std::string& hypothesis) {
  return align_edits(words(reference), words(hypothesis));
}

void expect_counts(const EditCounts& counts, int64_t substitutions, int64_t deletions,
                   int64_t insertions) {
  EXPECT_EQ(counts.substitutions, substitutions);
  EXPECT_EQ(counts.deletions, deletions);
  EXPECT_EQ(counts.insertions, insertions);
}

TEST(EditDistance, HandComputedCases) {
  expect_counts(edits("a b c", "a b c"), 0, 0, 0);
  expect_counts(edits("a b c", ""), 0, 3, 0);
  expect_counts(edits("", "a b"), 0, 0, 2);
  expect_counts(edits("", ""), 0, 0, 0);
  expect_counts(edits("a b c", "a x c"), 1, 0, 0);
  expect_counts(edits("a b c d", "a c d e"), 0, 1, 1);
  EXPECT_EQ(edits("a b c d", "a c d e").errors(), 2);
  EXPECT_EQ(edits("a b c", "a b").reference_length, 3);
}

TEST(EditDistance, TiesPreferSubstitutions) {
  // "a b" -> "b c": two substitutions or delete a, keep b, insert c; both cost 2.
  expect_counts(edits("a b", "b c"), 2, 0, 0);
  expect_counts(edits("a b c", "c d"), 2, 1, 0);
}

TEST(EditDistance, RateAndAccumulation) {
  EXPECT_DOUBLE_EQ(edits("a b c d", "a c d e").rate(), 0.5);
  EXPECT_DOUBLE_EQ(edits("", "").rate(), 0.0);
  EXPECT_DOUBLE_EQ(edits("", "a").rate(), 1.0);
  EditCounts total = edits("a b", "a x");
  total += edits("c d e", "c d e f");
  EXPECT_EQ(total.reference_length, 5);
  expect_counts(total, 1, 0, 1);
  EXPECT_DOUBLE_EQ(total.rate(), 0.4);
}

// The fewest edits turning reference[i..] into hypothesis[j..], as a plain recursion.
int64_t slow_distance(const std::vector<std::string>& reference,
                      const std::vector<std::string>& hypothesis, size_t i, size_t j) {
  if (i == reference.size()) return static_cast<int64_t>(hypothesis.size() - j);
  if (j == hypothesis.size()) return static_cast<int64_t>(reference.size() - i);
  const int64_t substitute =
      (reference[i] != hypothesis[j]) + slow_distance(reference, hypothesis, i + 1, j + 1);
  const int64_t remove = 1 + slow_distance(reference, hypothesis, i + 1, j);
  const int64_t insert = 1 + slow_distance(reference, hypothesis, i, j + 1);
  return std::min({substitute, remove, insert});
}

TEST(EditDistance, MatchesSlowRecursion) {
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {"a", "b", "c"};
  auto random_words = [&] {
    std::vector<std::string> tokens(std::uniform_int_distribution<int>(0, 6)(rng));
    for (auto& token : tokens) token = alphabet[std::uniform_int_distribution<int>(0, 2)(rng)];
    return tokens;
  };
  for (int trial = 0; trial < 300; ++trial) {
    const auto reference = random_words(), hypothesis = random_words();
    const EditCounts counts = align_edits(reference, hypothesis);
    ASSERT_EQ(counts.errors(), slow_distance(reference, hypothesis, 0, 0)) << "trial " << trial;
    // The alignment accounts for every token on both sides.
    const int64_t reference_length = static_cast<int64_t>(reference.size());
    const int64_t hypothesis_length = static_cast<int64_t>(hypothesis.size());
    EXPECT_EQ(counts.reference_length, reference_length);
    EXPECT_EQ(counts.deletions - counts.insertions, reference_length - hypothesis_length);
    EXPECT_LE(counts.substitutions + counts.deletions, reference_length);
  }
}

}  // namespace
