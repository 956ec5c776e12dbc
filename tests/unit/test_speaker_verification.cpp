// Speaker verification (evaluation/speaker_verification.h): the EER and minDCF against slow
// references (the original's threshold-grid EER, a detection cost at every threshold), and the
// trials the original draws.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "nabu/core/error.h"
#include "nabu/evaluation/speaker_verification.h"
#include "test_helpers.h"

namespace nabu {
namespace {

// equal_error_rate_from_ivecs.py's get_eer on a threshold grid fine enough that consecutive grid
// points never skip an operating point: rates at each threshold (accept when score > thr), the
// first grid point where the false-positive rate drops below the false-negative rate, and the
// intersection of the line through it and the previous point with the equal-error line.
double grid_eer(const std::vector<double>& scores, const std::vector<bool>& targets) {
  double low = *std::min_element(scores.begin(), scores.end()) - 1;
  double high = *std::max_element(scores.begin(), scores.end()) + 1;
  double targets_count = std::count(targets.begin(), targets.end(), true);
  double nontargets_count = targets.size() - targets_count;
  std::vector<double> fnr, fpr;
  for (double thr = low; thr <= high; thr += 1e-4) {
    double misses = 0, false_alarms = 0;
    for (std::size_t i = 0; i < scores.size(); ++i) {
      bool accepted = scores[i] > thr;
      if (targets[i] && !accepted) ++misses;
      if (!targets[i] && accepted) ++false_alarms;
    }
    fnr.push_back(misses / targets_count);
    fpr.push_back(false_alarms / nontargets_count);
  }
  for (std::size_t i = 1; i < fnr.size(); ++i)
    if (fpr[i] < fnr[i]) {
      double x1 = fnr[i - 1], y1 = fpr[i - 1], x2 = fnr[i], y2 = fpr[i];
      return ((x2 - x1) * y1 - (y2 - y1) * x1) / ((x2 - x1) - (y2 - y1));
    }
  return std::numeric_limits<double>::quiet_NaN();
}

// min over every threshold (accept score >= t, t at each score and above all) of the normalised
// detection cost.
double brute_min_dcf(const std::vector<double>& scores, const std::vector<bool>& targets,
                     double p_target, double c_miss, double c_fa) {
  double targets_count = std::count(targets.begin(), targets.end(), true);
  double nontargets_count = targets.size() - targets_count;
  std::vector<double> thresholds = scores;
  thresholds.push_back(std::numeric_limits<double>::infinity());
  double best = std::numeric_limits<double>::infinity();
  for (double t : thresholds) {
    double misses = 0, false_alarms = 0;
    for (std::size_t i = 0; i < scores.size(); ++i) {
      if (targets[i] && scores[i] < t) ++misses;
      if (!targets[i] && scores[i] >= t) ++false_alarms;
    }
    double dcf = c_miss * p_target * misses / targets_count +
                 c_fa * (1 - p_target) * false_alarms / nontargets_count;
    best = std::min(best, dcf / std::min(c_miss * p_target, c_fa * (1 - p_target)));
  }
  return best;
}

TEST(SpeakerVerification, EerAndMinDcfAgreeWithSlowReferences) {
  std::mt19937 random(5);
  for (int round = 0; round < 5; ++round) {
    std::normal_distribution<double> target(1.0, 0.6), nontarget(0.0, 0.6);
    std::vector<double> scores;
    std::vector<bool> targets;
    for (int i = 0; i < 60; ++i) {
      // Rounded to 0.01 so that scores tie, as cosines of few dimensions can; the grid step
      // (1e-4) then never skips an operating point.
      scores.push_back(std::round(target(random) * 100) / 100 + 0.003);
      targets.push_back(true);
    }
    for (int i = 0; i < 140; ++i) {
      scores.push_back(std::round(nontarget(random) * 100) / 100 + 0.003);
      targets.push_back(false);
    }
    auto metrics = verification_metrics(scores, targets, 0.05, 1.0, 1.0);
    EXPECT_EQ(metrics.targets, 60);
    EXPECT_EQ(metrics.nontargets, 140);
    EXPECT_NEAR(metrics.eer, grid_eer(scores, targets), 1e-9) << "round " << round;
    EXPECT_NEAR(metrics.min_dcf, brute_min_dcf(scores, targets, 0.05, 1.0, 1.0), 1e-12);
    EXPECT_GT(metrics.eer, 0.05);
    EXPECT_LT(metrics.eer, 0.5);
  }
}

TEST(SpeakerVerification, SeparatedAndReversedScores) {
  std::vector<double> scores{0.9, 0.8, 0.7, 0.1, 0.0, -0.5};
  std::vector<bool> targets{true, true, true, false, false, false};
  auto perfect = verification_metrics(scores, targets, 0.01, 1, 1);
  EXPECT_DOUBLE_EQ(perfect.eer, 0.0);
  EXPECT_DOUBLE_EQ(perfect.min_dcf, 0.0);
  EXPECT_GE(perfect.min_dcf_threshold, 0.1);
  EXPECT_LE(perfect.min_dcf_threshold, 0.7);
  std::vector<bool> reversed{false, false, false, true, true, true};
  EXPECT_DOUBLE_EQ(verification_metrics(scores, reversed, 0.01, 1, 1).eer, 1.0);
  // Accepting nothing costs c_miss * p_target, normalised to 1: minDCF never exceeds it.
  EXPECT_DOUBLE_EQ(verification_metrics(scores, reversed, 0.01, 1, 1).min_dcf, 1.0);
  EXPECT_NE(testing::error_of([&] {
              verification_metrics({0.1, 0.2}, {true, true}, 0.01, 1, 1);
            }).find("needs target and non-target trials (2 and 0 here)"),
            std::string::npos);
}

MixtureSpeakers corpus() {
  MixtureSpeakers speakers;
  const std::vector<std::pair<std::string, std::string>> people{
      {"a", "M"}, {"b", "F"}, {"c", "M"}, {"d", "F"}, {"e", "M"}, {"f", "F"}};
  int n = 0;
  for (std::size_t i = 0; i < people.size(); ++i)
    for (std::size_t j = 0; j < people.size(); ++j)
      if (i != j && (i + j) % 2 == 1) speakers["mix" + std::to_string(n++)] = {people[i], people[j]};
  return speakers;
}

TEST(SpeakerVerification, TrialsAreTheOriginalsKinds) {
  const auto speakers = corpus();
  auto trials = draw_trials(speakers, 3, false, "all", 11);
  int target_trials = 0, nontarget_trials = 0;
  for (const auto& [mixture, per_speaker] : trials.enrolments) {
    const auto& own = speakers.at(mixture);
    ASSERT_EQ(per_speaker.size(), own.size());
    for (std::size_t s = 0; s < own.size(); ++s) {
      int targets_here = 0, nontargets_here = 0;
      for (std::size_t k = 0; k < per_speaker[s].size(); ++k) {
        const auto& [other, index] = per_speaker[s][k];
        const auto& enrolled = speakers.at(other)[index].first;
        if (trials.targets.at(mixture)[s][k]) {
          ++targets_here;
          EXPECT_EQ(enrolled, own[s].first);
          EXPECT_NE(other, mixture);
        } else {
          ++nontargets_here;
          // From a mixture that shares no speaker with this one.
          for (const auto& speaker : speakers.at(other))
            for (const auto& mine : own) EXPECT_NE(speaker.first, mine.first);
        }
      }
      EXPECT_EQ(targets_here, 3);
      EXPECT_EQ(nontargets_here, 3);
      target_trials += targets_here;
      nontarget_trials += nontargets_here;
    }
  }
  EXPECT_EQ(target_trials, nontarget_trials);
  // The same seed draws the same trials; another seed others.
  auto again = draw_trials(speakers, 3, false, "all", 11);
  EXPECT_EQ(again.enrolments, trials.enrolments);
  EXPECT_NE(draw_trials(speakers, 3, false, "all", 12).enrolments, trials.enrolments);

  // Same-gender non-targets; only the competing speaker of the mixture.
  auto same = draw_trials(speakers, 3, false, "same_gen", 1);
  auto competing = draw_trials(speakers, 3, true, "all", 1);
  for (const auto& [mixture, per_speaker] : same.enrolments)
    for (std::size_t s = 0; s < per_speaker.size(); ++s)
      for (const auto& [other, index] : per_speaker[s])
        EXPECT_EQ(speakers.at(other)[index].second, speakers.at(mixture)[s].second);
  for (const auto& [mixture, per_speaker] : competing.enrolments)
    for (std::size_t s = 0; s < per_speaker.size(); ++s)
      for (std::size_t k = 0; k < per_speaker[s].size(); ++k)
        if (!competing.targets.at(mixture)[s][k]) {
          const auto& [other, index] = per_speaker[s][k];
          EXPECT_EQ(speakers.at(other)[index].first, speakers.at(mixture)[1 - s].first);
        }
  // only_m: no trials for a female speaker.
  auto only_m = draw_trials(speakers, 3, false, "only_m", 1);
  for (const auto& [mixture, per_speaker] : only_m.enrolments)
    for (std::size_t s = 0; s < per_speaker.size(); ++s)
      if (speakers.at(mixture)[s].second == "F") {
        EXPECT_TRUE(per_speaker[s].empty());
      }
}

}  // namespace
}  // namespace nabu
