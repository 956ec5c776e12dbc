// BSS Eval (mir_eval v3 semantics), SI-SDR, the scorer classes and the results summary.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/error.h"
#include "nabu/evaluation/scorers/bss_eval.h"
#include "nabu/evaluation/scorers/score_summary.h"
#include "nabu/evaluation/scorers/scorer.h"
#include "test_helpers.h"

namespace {

using namespace nabu;

double db(double num, double den) { return 10.0 * std::log10(num / den); }
double energy(const torch::Tensor& x) { return x.square().sum().item<double>(); }

// The decomposition written out plainly: an explicit matrix of delayed references, least squares
// by normal equations, SDR/SIR/SAR per pair, and the best permutation by mean SIR. With a noise
// signal (the original's sdr_snr), its delayed copies are appended to the basis: the noise error
// is the difference of the projections with and without them, SNR and SAR follow from it.
SeparationScores slow_bss_eval(const torch::Tensor& refs, const torch::Tensor& ests, int64_t taps,
                               const torch::Tensor& noise = {}) {
  const int64_t sources = refs.size(0), samples = refs.size(1), padded = samples + taps - 1;
  auto signals = noise.defined() ? torch::cat({refs, noise.unsqueeze(0)}) : refs;
  auto delayed = torch::zeros({padded, signals.size(0) * taps}, torch::kFloat64);
  for (int64_t i = 0; i < signals.size(0); ++i)
    for (int64_t a = 0; a < taps; ++a)
      delayed.slice(0, a, a + samples).select(1, i * taps + a) += signals[i];
  auto project = [&](const torch::Tensor& basis, const torch::Tensor& x) {
    auto coefficients = torch::linalg_solve(basis.t().matmul(basis), basis.t().matmul(x));
    return basis.matmul(coefficients);
  };
  std::vector<std::vector<double>> sdr(sources, std::vector<double>(sources)), sir = sdr, sar = sdr,
                                   snr = sdr;
  for (int64_t e = 0; e < sources; ++e) {
    auto estimate = torch::cat({ests[e], torch::zeros({taps - 1}, torch::kFloat64)});
    auto all = project(delayed.slice(1, 0, sources * taps), estimate);
    auto everything = project(delayed, estimate);
    for (int64_t j = 0; j < sources; ++j) {
      auto own = project(delayed.slice(1, j * taps, (j + 1) * taps), estimate);
      sdr[e][j] = db(energy(own), energy(estimate - own));
      sir[e][j] = db(energy(own), energy(all - own));
      sar[e][j] = db(energy(everything), energy(estimate - everything));
      snr[e][j] = db(energy(all), energy(everything - all));
    }
  }
  std::vector<int64_t> perm(sources), best;
  std::iota(perm.begin(), perm.end(), 0);
  double best_mean = -1e300;
  do {
    double mean = 0;
    for (int64_t j = 0; j < sources; ++j) mean += sir[perm[j]][j] / sources;
    if (mean > best_mean) best_mean = mean, best = perm;
  } while (std::next_permutation(perm.begin(), perm.end()));
  SeparationScores scores;
  scores.perm = best;
  for (int64_t j = 0; j < sources; ++j) {
    scores.sdr.push_back(sdr[best[j]][j]);
    scores.sir.push_back(sir[best[j]][j]);
    scores.sar.push_back(sar[best[j]][j]);
    if (noise.defined()) scores.snr.push_back(snr[best[j]][j]);
  }
  return scores;
}

void expect_same(const SeparationScores& got, const SeparationScores& want, double tolerance) {
  ASSERT_EQ(got.perm, want.perm);
  for (std::size_t j = 0; j < want.sdr.size(); ++j) {
    EXPECT_NEAR(got.sdr[j], want.sdr[j], tolerance) << "SDR " << j;
    EXPECT_NEAR(got.sir[j], want.sir[j], tolerance) << "SIR " << j;
    EXPECT_NEAR(got.sar[j], want.sar[j], tolerance) << "SAR " << j;
  }
}

TEST(PostBssEval, MatchesAnExplicitLeastSquaresDecomposition) {
  torch::manual_seed(4);
  for (int64_t sources : {2, 3}) {
    const int64_t samples = 700, taps = 24;
    auto refs = torch::randn({sources, samples}, torch::kFloat64);
    // Estimates: a filtered dominant source, leakage of the others, and noise; shuffled order.
    auto mixing = 0.3 * torch::rand({sources, sources}, torch::kFloat64) +
                  torch::eye(sources, torch::kFloat64);
    auto ests = mixing.matmul(refs) + 0.2 * torch::randn({sources, samples}, torch::kFloat64);
    ests.slice(1, 3) += 0.4 * refs.slice(1, 0, samples - 3);  // a short echo: distortion
    ests = ests.flip(0);
    auto want = slow_bss_eval(refs, ests, taps);
    expect_same(bss_eval_sources(refs.to(torch::kFloat32).to(torch::kFloat64), ests, taps), want, 1e-6);
    EXPECT_EQ(want.perm.front(), sources - 1);
  }
}

// The original's sdr_snr extension against the explicit decomposition with the noise appended.
TEST(PostBssEval, NoiseExtensionMatchesTheExplicitDecomposition) {
  torch::manual_seed(5);
  const int64_t samples = 600, taps = 16;
  auto refs = torch::randn({2, samples}, torch::kFloat64);
  auto noise = torch::randn({samples}, torch::kFloat64);
  auto ests = torch::stack({refs[1] + 0.2 * refs[0] + 0.3 * noise,
                            refs[0] + 0.1 * refs[1] + 0.05 * noise}) +
              0.1 * torch::randn({2, samples}, torch::kFloat64);
  auto want = slow_bss_eval(refs, ests, taps, noise);
  auto got = bss_eval_sources_with_noise(refs, ests, noise, taps);
  expect_same(got, want, 1e-6);
  ASSERT_EQ(got.snr.size(), 2u);
  for (int j = 0; j < 2; ++j) EXPECT_NEAR(got.snr[j], want.snr[j], 1e-6) << j;
  EXPECT_EQ(got.perm, (std::vector<int64_t>{1, 0}));
  // More noise in an estimate, lower SNR; SDR and SIR are those of the plain decomposition.
  EXPECT_LT(got.snr[1], got.snr[0]);
  auto plain = bss_eval_sources(refs, ests, taps);
  for (int j = 0; j < 2; ++j) {
    EXPECT_NEAR(got.sdr[j], plain.sdr[j], 1e-9);
    EXPECT_NEAR(got.sir[j], plain.sir[j], 1e-9);
  }
  EXPECT_THROW(bss_eval_sources_with_noise(refs, ests, torch::zeros({samples}, torch::kFloat64)),
               Error);
  EXPECT_THROW(bss_eval_sources_with_noise(refs, ests, noise.slice(0, 1)), Error);
}

TEST(PostBssEval, OrthogonalInterferenceHasAClosedFormSir) {
  // Sources with supports more than 512 samples apart: every delayed copy of one is orthogonal
  // to every delayed copy of the other.
  torch::manual_seed(5);
  const int64_t samples = 6000;
  auto refs = torch::zeros({2, samples}, torch::kFloat64);
  refs[0].slice(0, 0, 2500) = torch::randn({2500}, torch::kFloat64);
  refs[1].slice(0, 3100) = torch::randn({samples - 3100}, torch::kFloat64);
  auto ests = torch::stack({refs[0] + 0.3 * refs[1], refs[1] + 0.1 * refs[0]});
  auto scores = bss_eval_sources(refs, ests);
  double sir0 = db(energy(refs[0]), 0.09 * energy(refs[1]));
  double sir1 = db(energy(refs[1]), 0.01 * energy(refs[0]));
  EXPECT_NEAR(scores.sir[0], sir0, 1e-6);
  EXPECT_NEAR(scores.sir[1], sir1, 1e-6);
  EXPECT_NEAR(scores.sdr[0], sir0, 1e-6);  // no artifacts: all the error is interference
  EXPECT_NEAR(scores.sdr[1], sir1, 1e-6);
  EXPECT_GT(scores.sar[0], 80.0);
  EXPECT_GT(scores.sar[1], 80.0);
  EXPECT_EQ(scores.perm, (std::vector<int64_t>{0, 1}));
}

TEST(PostBssEval, ADelayWithinTheFilterIsNotDistortion) {
  torch::manual_seed(6);
  const int64_t samples = 5000, delay = 200;
  auto refs = torch::randn({2, samples}, torch::kFloat64);
  refs[0].slice(0, samples - 300) = 0;  // room for the delayed copy
  auto ests = refs.clone();
  ests[0] = torch::cat({torch::zeros({delay}, torch::kFloat64), refs[0].slice(0, 0, samples - delay)});
  auto scores = bss_eval_sources(refs, ests);
  EXPECT_GT(scores.sdr[0], 60.0);
  EXPECT_GT(scores.sdr[1], 60.0);
  // Beyond the 512 taps the delay becomes an error.
  ests[0] = torch::cat({torch::zeros({600}, torch::kFloat64), refs[0].slice(0, 0, samples - 600)});
  EXPECT_LT(bss_eval_sources(refs, ests).sdr[0], 5.0);
}

TEST(PostBssEval, WhiteNoiseGivesASarCloseToTheSnr) {
  torch::manual_seed(7);
  const int64_t samples = 8000;
  auto refs = torch::randn({2, samples}, torch::kFloat64);
  auto noise = torch::randn({2, samples}, torch::kFloat64);
  noise = noise / noise.square().sum(1, true).sqrt() * refs.square().sum(1, true).sqrt() *
          std::pow(10.0, -10.0 / 20.0);  // 10 dB SNR per source
  auto scores = bss_eval_sources(refs, refs + noise);
  for (int j = 0; j < 2; ++j) {
    EXPECT_NEAR(scores.sar[j], 10.0, 1.0);
    EXPECT_NEAR(scores.sdr[j], 10.0, 1.0);
  }
}

TEST(PostBssEval, SwappedEstimatesAreMatched) {
  torch::manual_seed(8);
  auto refs = torch::randn({2, 4000}, torch::kFloat64);
  auto ests = refs + 0.3 * torch::randn({2, 4000}, torch::kFloat64) + 0.2 * refs.flip(0);
  auto straight = bss_eval_sources(refs, ests);
  auto swapped = bss_eval_sources(refs, ests.flip(0));
  EXPECT_EQ(straight.perm, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(swapped.perm, (std::vector<int64_t>{1, 0}));
  for (int j = 0; j < 2; ++j) {
    EXPECT_NEAR(straight.sdr[j], swapped.sdr[j], 1e-9);
    EXPECT_NEAR(straight.sir[j], swapped.sir[j], 1e-9);
    EXPECT_NEAR(straight.sar[j], swapped.sar[j], 1e-9);
  }
}

TEST(PostBssEval, InvalidInputsAreRejected) {
  auto refs = torch::randn({2, 1000}, torch::kFloat64);
  EXPECT_THROW(bss_eval_sources(refs, refs.slice(1, 1)), Error);
  auto silent = refs.clone();
  silent[1] = 0;
  EXPECT_THROW(bss_eval_sources(silent, refs), Error);
  EXPECT_THROW(bss_eval_sources(refs, silent), Error);
  EXPECT_THROW(si_sdr_sources(refs, silent), Error);
}

// The scorers' linear systems with LibTorch at two threads, as `nabu test --threads=2` sets it:
// in a oneMKL build, batched LU at that setting gave invalid pivots and every system fell back to
// least squares (docs/results.md, "GPUs"). Each system is solved by
// LU, and only a singular one falls back, alone.
TEST(PostBssEval, SolvesEachSystemByLuWithManyThreads) {
  struct ThreadsGuard {
    int previous = torch::get_num_threads();
    ~ThreadsGuard() { torch::set_num_threads(previous); }
  } guard;
  torch::set_num_threads(2);
  torch::manual_seed(5);
  auto systems = torch::randn({4, 512, 512}, torch::kFloat64);
  auto sides = torch::randn({4, 512, 2}, torch::kFloat64);
  int64_t least_squares = 0;
  auto solutions = solve_each(systems, sides, &least_squares);
  EXPECT_EQ(least_squares, 0);
  ASSERT_EQ(solutions.sizes(), sides.sizes());
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_LT((systems[i].matmul(solutions[i]) - sides[i]).abs().max().item<double>(), 1e-8) << i;

  auto singular = systems.clone();
  singular[2].slice(0, 256).zero_();
  singular[2].slice(1, 256).zero_();
  least_squares = 0;
  solutions = solve_each(singular, sides, &least_squares);
  EXPECT_EQ(least_squares, 1);
  auto minimum_norm = torch::linalg_pinv(singular[2]).matmul(sides[2]);
  EXPECT_LT((solutions[2] - minimum_norm).abs().max().item<double>(), 1e-8);
  EXPECT_LT((systems[3].matmul(solutions[3]) - sides[3]).abs().max().item<double>(), 1e-8);
}

TEST(PostSiSdr, ClosedFormCases) {
  torch::manual_seed(9);
  const int64_t samples = 4000;
  auto raw = torch::randn({3, samples}, torch::kFloat64) + 0.5;  // non-zero means on purpose
  auto zero_mean = raw - raw.mean(1, true);
  // Gram-Schmidt: r0, r1 and n mutually orthogonal and zero-mean.
  auto r0 = zero_mean[0];
  auto r1 = zero_mean[1] - (zero_mean[1].dot(r0) / r0.dot(r0)) * r0;
  auto n = zero_mean[2] - (zero_mean[2].dot(r0) / r0.dot(r0)) * r0 - (zero_mean[2].dot(r1) / r1.dot(r1)) * r1;
  n = 0.2 * n;
  auto refs = torch::stack({r0 + 3.0, r1 - 1.0});  // offsets: SI-SDR removes the means

  // Scaled references: scale invariance gives (near) infinite SI-SDR.
  auto scaled = bss_eval_sources(refs, refs);  // sanity of the fixture
  EXPECT_GT(scaled.sdr[0], 100.0);
  auto scores = si_sdr_sources(refs, torch::stack({0.5 * refs[0], 2.0 * refs[1]}));
  EXPECT_GT(scores.sdr[0], 100.0);
  EXPECT_GT(scores.sdr[1], 100.0);

  // Reference plus orthogonal noise: 10 log10(|r|^2 / |n|^2); the noise is not interference.
  scores = si_sdr_sources(refs, torch::stack({refs[0] + n + 7.0, refs[1] + n}));
  EXPECT_NEAR(scores.sdr[0], db(energy(r0), energy(n)), 1e-9);
  EXPECT_NEAR(scores.sdr[1], db(energy(r1), energy(n)), 1e-9);
  EXPECT_NEAR(scores.sar[0], db(energy(r0), energy(n)), 1e-9);
  EXPECT_GT(scores.sir[0], 100.0);

  // Leakage of the other (orthogonal) source is interference, in the matched order.
  scores = si_sdr_sources(refs, torch::stack({refs[1] + 0.1 * r0, refs[0] + 0.3 * r1}));
  EXPECT_EQ(scores.perm, (std::vector<int64_t>{1, 0}));
  EXPECT_NEAR(scores.sdr[0], db(energy(r0), 0.09 * energy(r1)), 1e-9);
  EXPECT_NEAR(scores.sir[0], db(energy(r0), 0.09 * energy(r1)), 1e-9);
  EXPECT_NEAR(scores.sdr[1], db(energy(r1), 0.01 * energy(r0)), 1e-9);
  EXPECT_GT(scores.sar[1], 100.0);
}

// ---------------------------------------------------------------------------------------------

ConfigFile scorer_config(const std::string& type) {
  return ConfigFile::parse("[task]\nscore_type = " + type +
                               "\norg_src = testorgsrc\nbase = testbase\nspkinfo = testspkinfo\n",
                           "scorer.cfg");
}

TEST(PostScorer, SdrScorerGivesScoresBaselineAndImprovement) {
  torch::manual_seed(10);
  auto config = scorer_config("sdr");
  auto scorers = make_scorers(config.sections().front());
  ASSERT_EQ(scorers.size(), 1u);
  const auto& scorer = *scorers.front();
  EXPECT_EQ(scorer.metrics(), (std::vector<std::string>{"SDR", "SIR", "SAR"}));
  auto refs = torch::randn({2, 4000}, torch::kFloat64);
  auto mixture = refs.sum(0);
  auto ests = (refs + 0.1 * torch::randn({2, 4000}, torch::kFloat64)).flip(0);
  auto values = scorer.score(refs, ests, mixture);
  auto direct = bss_eval_sources(refs, ests);
  auto base = bss_eval_sources(refs, torch::stack({mixture, mixture}));
  EXPECT_NEAR(values["SDR"], 0.5 * (direct.sdr[0] + direct.sdr[1]), 1e-9);
  EXPECT_NEAR(values["SAR"], 0.5 * (direct.sar[0] + direct.sar[1]), 1e-9);
  EXPECT_NEAR(values["SDR_base"], 0.5 * (base.sdr[0] + base.sdr[1]), 1e-9);
  EXPECT_NEAR(values["SIR_base"], 0.5 * (base.sir[0] + base.sir[1]), 1e-9);
  EXPECT_NEAR(values["SDRi"], values["SDR"] - values["SDR_base"], 1e-12);
  // Two independent equal-power white sources of N samples: the 512-tap projection of the
  // mixture on one source also captures about 512/N of the other's energy, so the baseline SDR
  // is about 10 log10((1 + 512/N) / (1 - 512/N)) = 1.12 dB for N = 4000.
  EXPECT_NEAR(values["SDR_base"], 10.0 * std::log10((1.0 + 512.0 / 4000) / (1.0 - 512.0 / 4000)),
              0.3);
  EXPECT_GT(values["SDRi"], 15.0);
  auto detail = scorer.evaluate(refs, ests, mixture);
  EXPECT_EQ(detail.permutation["SS"], (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(detail.values["SDR"]["SS"].size(), 2u);
  EXPECT_THROW(scorer.score(refs, ests.slice(1, 1), mixture), Error);
}

TEST(PostScorer, SiSdrScorerAndConfiguration) {
  auto config = scorer_config("sdr si_sdr");
  auto scorers = make_scorers(config.sections().front());
  ASSERT_EQ(scorers.size(), 2u);
  EXPECT_EQ(scorers[1]->type(), "si_sdr");
  torch::manual_seed(11);
  auto refs = torch::randn({2, 3000}, torch::kFloat64);
  auto values = scorers[1]->score(refs, 0.5 * refs, refs.sum(0));
  EXPECT_GT(values["SI-SDR"], 100.0);  // a scaled reference is perfect (+inf as in mir_eval)
  auto noisy = scorers[1]->score(refs, 0.5 * refs + 0.1 * torch::randn({2, 3000}, torch::kFloat64),
                                 refs.sum(0));
  EXPECT_TRUE(std::isfinite(noisy["SI-SDR"]));
  EXPECT_NEAR(noisy["SI-SDRi"], noisy["SI-SDR"] - noisy["SI-SDR_base"], 1e-12);

  auto bad = ConfigFile::parse("[t]\nscore_type = sdr\norg_src = a\nbase = b\nspkinfo = c\nbasis = d\n",
                               "scorer.cfg");
  try {
    make_scorers(bad.sections().front());
    ADD_FAILURE() << "unknown key accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("scorer.cfg:6"), std::string::npos) << e.what();
  }
  auto unknown = ConfigFile::parse("[t]\nscore_type = sdrr\norg_src = a\nbase = b\nspkinfo = c\n",
                                   "scorer.cfg");
  EXPECT_THROW(make_scorers(unknown.sections().front()), ConfigError);
  auto missing = ConfigFile::parse("[t]\nscore_type = sdr\norg_src = a\nbase = b\n", "scorer.cfg");
  EXPECT_THROW(make_scorers(missing.sections().front()), ConfigError);

  auto recipe = nabu::testing::reference_recipe_dir();
  if (!recipe.empty()) {
    auto original = ConfigFile::load(recipe / "scorer.cfg");
    for (const auto& section : original.sections())
      EXPECT_EQ(make_scorers(section).size(), 1u) << section.name();
  }
}

TEST(PostScorer, SdrSnrScorerNeedsItsNoiseSection) {
  auto config = ConfigFile::parse(
      "[task]\nscore_type = sdr_snr\norg_src = o\nnoise = n\nbase = b\nspkinfo = s\n", "scorer.cfg");
  auto scorers = make_scorers(config.sections().front());
  const auto& scorer = *scorers.front();
  EXPECT_EQ(scorer.metrics(), (std::vector<std::string>{"SDR", "SIR", "SNR", "SAR"}));
  torch::manual_seed(12);
  auto refs = torch::randn({2, 3000}, torch::kFloat64);
  auto noise = 0.3 * torch::randn({3000}, torch::kFloat64);
  auto mixture = refs.sum(0) + noise;
  auto ests = refs + 0.1 * torch::randn({2, 3000}, torch::kFloat64);
  auto values = scorer.score(refs, ests, mixture, noise);
  auto direct = bss_eval_sources_with_noise(refs, ests, noise);
  auto base = bss_eval_sources_with_noise(refs, torch::stack({mixture, mixture}), noise);
  EXPECT_NEAR(values["SNR"], 0.5 * (direct.snr[0] + direct.snr[1]), 1e-9);
  EXPECT_NEAR(values["SNR_base"], 0.5 * (base.snr[0] + base.snr[1]), 1e-9);
  EXPECT_NEAR(values["SNRi"], values["SNR"] - values["SNR_base"], 1e-12);
  EXPECT_GT(values["SNRi"], 10.0);  // the estimates hold (almost) no noise, the mixture all of it
  EXPECT_THROW(scorer.score(refs, ests, mixture), Error);  // no noise signal given

  auto missing = ConfigFile::parse("[t]\nscore_type = sdr_snr\norg_src = a\nbase = b\nspkinfo = c\n",
                                   "scorer.cfg");
  try {
    make_scorers(missing.sections().front());
    ADD_FAILURE() << "sdr_snr without noise accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("noise"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("scorer.cfg"), std::string::npos) << e.what();
  }
}

UtteranceScore fake_score(double sdr_ss_a, double sdr_ss_b, double sdr_base) {
  UtteranceScore score;
  for (const std::string metric : {"SDR", "SIR", "SAR"}) {
    score.values[metric]["SS"] = {sdr_ss_a, sdr_ss_b};
    score.values[metric]["base"] = {sdr_base, sdr_base};
  }
  score.permutation["SS"] = {1, 0};
  score.permutation["base"] = {0, 1};
  return score;
}

// The per-utterance report of nabu test: utterances by the first metric's improvement, lowest
// first, each with its mixture kind, speakers, every metric and its files.
TEST(PostSummary, UtterancesCsvAndTheWorstAreOrderedByImprovement) {
  SpeakerInfo speakers;
  speakers["mm"] = {{"s1", "M"}, {"s2", "M"}};
  speakers["mf"] = {{"s1", "M"}, {"s3", "F"}};
  speakers["m?"] = {{"s1", "M"}, {"s9", "?"}};
  ScoreSummary summary({"SDR", "SIR", "SAR"}, speakers);
  summary.add("mm", fake_score(10, 12, 1));   // SDRi 10
  summary.add("mf", fake_score(2, 4, 1));     // SDRi 2
  summary.add("m?", fake_score(6, 6, 0));     // SDRi 6
  const auto rows = summary.by_improvement();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], (std::pair<std::string, double>{"mf", 2.0}));
  EXPECT_EQ(rows[1].first, "m?");
  EXPECT_EQ(rows[2].first, "mm");
  const std::map<std::string, std::vector<std::string>> files{
      {"mf", {"mix/mf.wav", "s1/mf.wav", "s2/mf.wav"}}, {"mm", {"mix/mm.wav"}}};
  const auto csv = split(summary.utterances_csv(files), '\n');
  ASSERT_EQ(csv.size(), 5u);  // header, three rows, the final newline
  EXPECT_EQ(csv[0],
            "utterance,mixture_kind,speakers,SDR_separated,SDR_mixture,SDR_improvement,"
            "SIR_separated,SIR_mixture,SIR_improvement,SAR_separated,SAR_mixture,"
            "SAR_improvement,files");
  EXPECT_EQ(csv[1], "mf,diff_gen,s1 s3,3.0000,1.0000,2.0000,3.0000,1.0000,2.0000,3.0000,1.0000,"
                    "2.0000,mix/mf.wav s1/mf.wav s2/mf.wav");
  EXPECT_EQ(csv[2].substr(0, 17), "m?,unknown,s1 s9,");
  EXPECT_EQ(csv[2].back(), ',');  // no files known
  EXPECT_EQ(csv[3].substr(0, 17), "mm,same_gen,s1 s2");
  const std::string worst = summary.worst_text(2, files);
  EXPECT_NE(worst.find("the 2 lowest SDR improvements"), std::string::npos) << worst;
  EXPECT_NE(worst.find("   2.00 dB  mf  mix/mf.wav\n"), std::string::npos) << worst;
  EXPECT_NE(worst.find("   6.00 dB  m?\n"), std::string::npos) << worst;
  EXPECT_EQ(worst.find("mm"), std::string::npos) << worst;
  EXPECT_NE(summary.summary_text("stoi", "").find("mean over mixtures\n"), std::string::npos);
}

TEST(PostSummary, ResultsJsonLayoutAndStatistics) {
  nabu::testing::TempDir dir;
  nabu::testing::write_text(dir / "spkinfo.txt",
                            "mm 0.5 s1 M s2 M\nff 1.2 s3 F s4 F\n\nmf 0.1 s1 M s3 F\n"
                            "fm 0.3 s4 F s2 M\n");
  auto speakers = read_speaker_info(dir / "spkinfo.txt");
  ASSERT_EQ(speakers.size(), 4u);
  EXPECT_EQ(speakers["mf"][1], (std::pair<std::string, std::string>{"s3", "F"}));

  ScoreSummary summary({"SDR", "SIR", "SAR"}, speakers);
  summary.add("mm", fake_score(10, 12, 1));    // mean 11
  summary.add("ff", fake_score(4, 6, 0));      // mean 5
  summary.add("mf", fake_score(20, 20, -1));   // mean 20
  summary.add("fm", fake_score(14, 16, 2));    // mean 15
  EXPECT_THROW(summary.add("unknown", fake_score(1, 1, 1)), Error);

  auto complete = summary.complete_json();
  ASSERT_EQ(complete.size(), 4u);
  EXPECT_EQ(complete["mm"]["score"]["SDR"]["SS"], nlohmann::json({10.0, 12.0}));
  EXPECT_EQ(complete["mm"]["score"]["perm"]["SS"], nlohmann::json({1, 0}));
  EXPECT_EQ(complete["mf"]["spk_info"]["ids"], nlohmann::json({"s1", "s3"}));
  EXPECT_EQ(complete["mf"]["spk_info"]["genders"], nlohmann::json({"M", "F"}));
  EXPECT_EQ(complete["mm"]["spk_info"]["mix_type"]["all_m"], true);
  EXPECT_EQ(complete["mm"]["spk_info"]["mix_type"]["same_gen"], true);
  EXPECT_EQ(complete["ff"]["spk_info"]["mix_type"]["all_f"], true);
  EXPECT_EQ(complete["mf"]["spk_info"]["mix_type"]["diff_gen"], true);
  EXPECT_EQ(complete["mf"]["spk_info"]["mix_type"]["same_gen"], false);

  auto result = summary.summary_json();
  const auto& all = result["SDR"]["SS"]["all"];
  // Utterance means 11, 5, 20, 15: mean 12.75, population std, median (11 + 15) / 2.
  double mean = 12.75;
  double var = ((11 - mean) * (11 - mean) + (5 - mean) * (5 - mean) + (20 - mean) * (20 - mean) +
                (15 - mean) * (15 - mean)) / 4;
  EXPECT_DOUBLE_EQ(all["mean"].get<double>(), mean);
  EXPECT_DOUBLE_EQ(all["std"].get<double>(), std::sqrt(var));
  EXPECT_DOUBLE_EQ(all["median"].get<double>(), 13.0);
  EXPECT_DOUBLE_EQ(result["SDR"]["SS"]["diff_gen"]["mean"].get<double>(), 17.5);
  EXPECT_DOUBLE_EQ(result["SDR"]["SS"]["same_gen"]["median"].get<double>(), 8.0);
  EXPECT_DOUBLE_EQ(result["SDR"]["SS"]["all_f"]["std"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(result["SAR"]["base"]["all"]["mean"].get<double>(), 0.5);
  EXPECT_FALSE(result.contains("perm"));
  // The table: separated, mixture and improvement per metric and gender group.
  auto text = summary.summary_text("sdr");
  EXPECT_NE(text.find("sdr (SDR, SIR, SAR, 4 mixtures)"), std::string::npos) << text;
  EXPECT_NE(text.find("  SDR      all"), std::string::npos) << text;
  EXPECT_NE(text.find("12.75"), std::string::npos) << text;
  EXPECT_NE(text.find("diff (2)"), std::string::npos) << text;
  // A mixture has no artifacts (its SAR is round-off): no mixture SAR, no "improvement" of it.
  const auto sar = text.find("  SAR      all");
  ASSERT_NE(sar, std::string::npos) << text;
  const std::string sar_row = text.substr(sar, text.find('\n', sar) - sar);
  EXPECT_EQ(sar_row.substr(sar_row.size() - 24), "          -            -") << text;
  EXPECT_NE(text.find("(a mixture has no artifacts, being its sources' sum: no mixture SAR, no "
                      "improvement)"),
            std::string::npos)
      << text;

  // An empty group has no statistics (null), and a checkpoint restores the same summary.
  ScoreSummary only_men({"SDR", "SIR", "SAR"}, speakers);
  only_men.add("mm", fake_score(10, 12, 1));
  EXPECT_TRUE(only_men.summary_json()["SDR"]["SS"]["all_f"]["mean"].is_null());
  ScoreSummary restored({"SDR", "SIR", "SAR"}, speakers);
  restored.load_complete_json(nlohmann::json::parse(complete.dump()));
  EXPECT_EQ(restored.size(), 4u);
  EXPECT_EQ(restored.summary_json(), result);
  EXPECT_EQ(restored.complete_json(), complete);

  nabu::testing::write_text(dir / "bad.txt", "u1 x s1 M\nu2 x s1\n");
  try {
    read_speaker_info(dir / "bad.txt");
    ADD_FAILURE() << "malformed speaker info accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.txt:2"), std::string::npos) << e.what();
  }
}

// Timing of one 4 s, 2-speaker utterance at 8 kHz (run with --gtest_also_run_disabled_tests).
TEST(PostScorer, DISABLED_TimingOfOneUtterance) {
  torch::manual_seed(12);
  auto config = scorer_config("sdr");
  auto scorer = make_scorers(config.sections().front()).front();
  auto refs = torch::randn({2, 32000}, torch::kFloat64);
  auto ests = refs + 0.3 * torch::randn({2, 32000}, torch::kFloat64);
  scorer->score(refs, ests, refs.sum(0));
  auto start = std::chrono::steady_clock::now();
  const int repeats = 5;
  for (int i = 0; i < repeats; ++i) scorer->score(refs, ests, refs.sum(0));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "sdr scorer: " << seconds / repeats << " s per utterance (threads "
            << torch::get_num_threads() << ")\n";
}

}  // namespace
