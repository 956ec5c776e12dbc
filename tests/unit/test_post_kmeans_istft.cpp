// k-means (sklearn semantics) and the overlap-add inverse STFT used by the reconstructors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "nabu/core/error.h"
#include "nabu/inference/reconstructors/kmeans.h"
#include "nabu/inference/reconstructors/reconstructor.h"
#include "nabu/processing/signal.h"

namespace {

using namespace nabu;

// Three well separated blobs in 5-D; returns points and their true cluster index.
std::pair<torch::Tensor, std::vector<int>> blobs(int per_cluster, double spread) {
  torch::manual_seed(11);
  const double centres[3][5] = {{10, 0, 0, 0, 0}, {0, 10, 0, 0, 5}, {-8, -8, 3, 0, 0}};
  std::vector<torch::Tensor> parts;
  std::vector<int> truth;
  for (int c = 0; c < 3; ++c) {
    auto centre = torch::tensor(std::vector<double>(centres[c], centres[c] + 5));
    parts.push_back(centre + spread * torch::randn({per_cluster, 5}, torch::kFloat64));
    truth.insert(truth.end(), per_cluster, c);
  }
  return {torch::cat(parts), truth};
}

double slow_squared_distance(const torch::Tensor& a, const torch::Tensor& b) {
  double sum = 0.0;
  for (int64_t d = 0; d < a.size(0); ++d) {
    double diff = a[d].item<double>() - b[d].item<double>();
    sum += diff * diff;
  }
  return sum;
}

std::vector<int64_t> slow_nearest(const torch::Tensor& points, const torch::Tensor& centers) {
  std::vector<int64_t> labels;
  for (int64_t n = 0; n < points.size(0); ++n) {
    int64_t best = 0;
    double best_distance = std::numeric_limits<double>::infinity();
    for (int64_t k = 0; k < centers.size(0); ++k) {
      double d = slow_squared_distance(points[n], centers[k]);
      if (d < best_distance) best = k, best_distance = d;
    }
    labels.push_back(best);
  }
  return labels;
}

TEST(PostKMeans, RecoversWellSeparatedClusters) {
  auto [points, truth] = blobs(100, 0.5);
  KMeansOptions options;
  options.num_clusters = 3;
  options.seed = 3;
  auto result = kmeans_fit(points, options);
  ASSERT_EQ(result.centers.sizes(), (std::vector<int64_t>{3, 5}));
  // Every true cluster maps to exactly one found cluster (a relabelling of the truth).
  auto labels = result.labels.to(torch::kLong);
  std::vector<int> mapping(3, -1);
  for (std::size_t n = 0; n < truth.size(); ++n) {
    int found = static_cast<int>(labels[n].item<int64_t>());
    if (mapping[truth[n]] < 0) mapping[truth[n]] = found;
    ASSERT_EQ(mapping[truth[n]], found) << "point " << n;
  }
  EXPECT_NE(mapping[0], mapping[1]);
  EXPECT_NE(mapping[1], mapping[2]);
  EXPECT_NE(mapping[0], mapping[2]);
  // Centres are the cluster means; inertia is the sum of squared distances to them.
  double inertia = 0.0;
  for (int c = 0; c < 3; ++c) {
    auto mean = torch::zeros({5}, torch::kFloat64);
    int count = 0;
    for (std::size_t n = 0; n < truth.size(); ++n)
      if (truth[n] == c) mean += points[n], ++count;
    mean /= count;
    EXPECT_LT(slow_squared_distance(mean, result.centers[mapping[c]]), 1e-18);
    for (std::size_t n = 0; n < truth.size(); ++n)
      if (truth[n] == c) inertia += slow_squared_distance(points[n], mean);
  }
  EXPECT_NEAR(result.inertia, inertia, 1e-9 * inertia);
  // predict agrees with a nearest-centre loop.
  auto predicted = kmeans_predict(points.to(torch::kFloat32), result.centers);
  auto expected = slow_nearest(points, result.centers);
  for (std::size_t n = 0; n < expected.size(); ++n)
    ASSERT_EQ(predicted[n].item<int64_t>(), expected[n]);
}

TEST(PostKMeans, LloydMatchesASlowReferenceFromTheSameSeeding) {
  // Overlapping blobs so that Lloyd needs several iterations.
  auto [points, truth] = blobs(40, 6.0);
  const int64_t k = 4;
  const uint64_t seed = 21;
  auto centers = kmeans_plusplus(points, k, seed);
  // k-means++ picks data points as centres.
  for (int64_t c = 0; c < k; ++c) {
    double nearest = std::numeric_limits<double>::infinity();
    for (int64_t n = 0; n < points.size(0); ++n)
      nearest = std::min(nearest, slow_squared_distance(points[n], centers[c]));
    EXPECT_EQ(nearest, 0.0);
  }
  // Slow Lloyd: assign, average, until the assignment no longer changes (tol = 0).
  std::vector<int64_t> labels;
  for (int iteration = 0; iteration < 300; ++iteration) {
    auto next = slow_nearest(points, centers);
    if (next == labels) break;
    labels = next;
    auto updated = centers.clone();
    for (int64_t c = 0; c < k; ++c) {
      auto sum = torch::zeros({points.size(1)}, torch::kFloat64);
      int count = 0;
      for (std::size_t n = 0; n < labels.size(); ++n)
        if (labels[n] == c) sum += points[n], ++count;
      if (count > 0) updated[c] = sum / count;
    }
    centers = updated;
  }
  KMeansOptions options;
  options.num_clusters = k;
  options.n_init = 1;
  options.max_iter = 300;
  options.tol = 0.0;
  options.seed = seed;
  auto result = kmeans_fit(points, options);
  EXPECT_TRUE(torch::allclose(result.centers, centers, 1e-9, 1e-9));
}

TEST(PostKMeans, DeterministicForASeedAndLeavesTheGlobalRngAlone) {
  auto [points, truth] = blobs(50, 3.0);
  KMeansOptions options;
  options.num_clusters = 5;
  options.seed = 7;
  torch::manual_seed(99);
  auto before = torch::rand({4});
  torch::manual_seed(99);
  auto first = kmeans_fit(points, options);
  auto after = torch::rand({4});
  EXPECT_TRUE(torch::equal(before, after)) << "k-means consumed the global torch RNG";
  auto second = kmeans_fit(points, options);
  EXPECT_TRUE(torch::equal(first.centers, second.centers));
  EXPECT_TRUE(torch::equal(first.labels, second.labels));
  EXPECT_EQ(first.inertia, second.inertia);
  // More restarts never end with a worse optimum than one of them.
  options.n_init = 1;
  EXPECT_LE(first.inertia, kmeans_fit(points, options).inertia + 1e-9);
}

TEST(PostKMeans, MoreClustersThanDistinctPoints) {
  auto points = torch::tensor({{0.0, 0.0}, {0.0, 0.0}, {1.0, 1.0}, {1.0, 1.0}}, torch::kFloat64);
  for (int64_t k : {3, 5}) {
    KMeansOptions options;
    options.num_clusters = k;
    auto result = kmeans_fit(points, options);
    ASSERT_EQ(result.centers.size(0), k);
    EXPECT_TRUE(torch::isfinite(result.centers).all().item<bool>());
    EXPECT_NEAR(result.inertia, 0.0, 1e-12);
    auto labels = kmeans_predict(points, result.centers);
    EXPECT_EQ(labels[0].item<int64_t>(), labels[1].item<int64_t>());
    EXPECT_NE(labels[0].item<int64_t>(), labels[2].item<int64_t>());
  }
  // A single point.
  KMeansOptions options;
  auto single = kmeans_fit(torch::ones({1, 3}), options);
  EXPECT_TRUE(torch::isfinite(single.centers).all().item<bool>());
  EXPECT_THROW(kmeans_fit(torch::zeros({0, 3}), options), Error);
}

// ---------------------------------------------------------------------------------------------
// Weighted overlap-add inverse (docs/postprocessing.md).

FrameSettings settings_with(const std::string& window) {
  FrameSettings settings;  // 8 kHz, 32 ms frames (256 samples), 8 ms hop, nfft 256
  settings.winfunc = window;
  return settings;
}

TEST(PostIstft, UnmaskedSpectrumIsAPerfectReconstruction) {
  torch::manual_seed(1);
  const int64_t length = 4001;  // not a whole number of hops
  auto signal = torch::randn({length}, torch::kFloat64);
  for (const std::string window : {"cosine", "hanning", "hamming"}) {
    auto settings = settings_with(window);
    auto spectrum = frames_spectrum(frame_signal(signal, settings), settings.nfft);
    auto back = overlap_add_inverse(spectrum, settings, length);
    ASSERT_EQ(back.size(0), length);
    // Away from the edges every window reconstructs exactly.
    int64_t edge = settings.frame_length();
    auto inner = (back - signal).slice(0, edge, length - edge).abs().max().item<double>();
    EXPECT_LT(inner, 1e-9) << window;
    // At the edges the signal fades in and out by (sum of squared windows) / (that sum floored
    // at kEdgeFloor of its largest value): exactly where enough windows overlap.
    auto window_values = make_window(window, edge);
    std::vector<double> power(length, 0.0);
    for (int64_t t = 0; t < spectrum.size(0); ++t)
      for (int64_t m = 0; m < edge && t * settings.frame_step() + m < length; ++m)
        power[t * settings.frame_step() + m] += std::pow(window_values[m].item<double>(), 2);
    double largest = *std::max_element(power.begin(), power.end());
    int64_t faded = 0;
    for (int64_t i = 0; i < length; ++i) {
      double gain = power[i] / std::max(power[i], kEdgeFloor * largest);
      faded += gain < 1.0;
      ASSERT_NEAR(back[i].item<double>(), gain * signal[i].item<double>(), 1e-9)
          << window << " sample " << i;
    }
    if (window == "cosine") {
      EXPECT_LT(faded, 2 * 40) << "the fade is a few ms at each end";
    }
  }
}

// A mask leaves energy at the edges of a frame, where one window's tail alone covers the first
// and last samples; dividing by that tail made clicks up to 160 times the signal. Random masks in
// [0, 1] are the worst case: every frame's inverse spreads over the whole frame.
TEST(PostIstft, MaskedEdgesStayWithinTheMixturesRange) {
  torch::manual_seed(4);
  auto settings = settings_with("cosine");
  const int64_t length = 8000, frame = settings.frame_length();
  auto mixture = torch::randn({length}, torch::kFloat64);
  auto spectrum = frames_spectrum(frame_signal(mixture, settings), settings.nfft);
  double peak = mixture.abs().max().item<double>();
  for (int trial = 0; trial < 5; ++trial) {
    auto mask = torch::rand(spectrum.sizes(), torch::kFloat64);
    auto back = overlap_add_inverse(spectrum * mask, settings, length);
    EXPECT_LT(back.slice(0, 0, frame).abs().max().item<double>(), peak) << trial;
    EXPECT_LT(back.slice(0, length - frame).abs().max().item<double>(), peak) << trial;
  }
}

TEST(PostIstft, MatchesAnExplicitInverseDftOverlapAdd) {
  torch::manual_seed(2);
  auto settings = settings_with("cosine");
  const int64_t frames = 6, bins = settings.num_bins(), n = settings.nfft;
  const int64_t step = settings.frame_step(), frame_length = settings.frame_length();
  auto spectrum = torch::complex(torch::randn({frames, bins}, torch::kFloat64),
                                 torch::randn({frames, bins}, torch::kFloat64));
  const int64_t total = (frames - 1) * step + frame_length;
  auto result = overlap_add_inverse(spectrum, settings, 0);  // 0 = keep everything
  ASSERT_EQ(result.size(0), total);

  auto window = make_window("cosine", frame_length);
  std::vector<double> sum(total, 0.0), power(total, 0.0);
  auto re = torch::real(spectrum), im = torch::imag(spectrum);
  for (int64_t t = 0; t < frames; ++t) {
    for (int64_t m = 0; m < frame_length; ++m) {
      // numpy irfft: the imaginary parts of the DC and Nyquist bins are ignored.
      double value = re[t][0].item<double>() + re[t][bins - 1].item<double>() * (m % 2 ? -1 : 1);
      for (int64_t k = 1; k < bins - 1; ++k) {
        double angle = 2.0 * M_PI * k * m / n;
        value += 2.0 * (re[t][k].item<double>() * std::cos(angle) -
                        im[t][k].item<double>() * std::sin(angle));
      }
      // Windowed again, normalised by the squared windows (the least-squares inverse).
      sum[t * step + m] += value / n * window[m].item<double>();
      power[t * step + m] += std::pow(window[m].item<double>(), 2);
    }
  }
  double floor = kEdgeFloor * *std::max_element(power.begin(), power.end());
  for (int64_t i = 0; i < total; ++i)
    ASSERT_NEAR(result[i].item<double>(), sum[i] / std::max(power[i], floor), 1e-9)
        << "sample " << i;
}

TEST(PostIstft, MasksToSignalsAppliesMasksAndNormalises) {
  torch::manual_seed(3);
  auto settings = settings_with("cosine");
  const int64_t length = 3000;
  auto signal = 0.3 * torch::randn({length}, torch::kFloat64);
  // Its peak away from the edges, where the inverse fades in and out (tested above).
  signal[length / 2] = 2.0;
  auto spectrum = frames_spectrum(frame_signal(signal, settings), settings.nfft);
  const int64_t frames = spectrum.size(0), bins = spectrum.size(1);
  const int64_t edge = settings.frame_length();
  auto masks = torch::stack({torch::ones({frames, bins}), torch::zeros({frames, bins}),
                             torch::full({frames, bins}, 0.25)});
  auto signals = masks_to_signals(masks, spectrum.to(torch::kComplexFloat), settings, length);
  ASSERT_EQ(signals.sizes(), (std::vector<int64_t>{3, length}));
  auto expected = (signal / signal.abs().max()).slice(0, edge, length - edge);
  EXPECT_LT((signals[0].slice(0, edge, length - edge) - expected).abs().max().item<double>(), 1e-5);
  EXPECT_EQ(signals[1].abs().max().item<double>(), 0.0);  // silent, not NaN
  EXPECT_LT((signals[2].slice(0, edge, length - edge) - expected).abs().max().item<double>(), 1e-5);
  EXPECT_NEAR(signals[0].abs().max().item<double>(), 1.0, 1e-12);
  EXPECT_THROW(masks_to_signals(masks.slice(1, 1), spectrum, settings, length), Error);
  auto bad = settings;
  bad.nfft = 128;
  EXPECT_THROW(overlap_add_inverse(spectrum, bad, length), Error);
}

}  // namespace
