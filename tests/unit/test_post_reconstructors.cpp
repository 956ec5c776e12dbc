// Reconstructors with oracle inputs: embeddings and stacked masks built from the ideal binary
// mask of a synthetic two-source mixture must separate it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/error.h"
#include "nabu/inference/reconstructors/reconstructor.h"
#include "nabu/evaluation/scorers/bss_eval.h"
#include "nabu/processing/signal.h"
#include "test_helpers.h"

namespace {

using namespace nabu;

const ConfigSection& section_of(const ConfigFile& file) { return file.sections().front(); }

ConfigFile parse(const std::string& text) { return ConfigFile::parse(text, "reconstructor.cfg"); }

// Two sources in different frequency bands with different envelopes, their mixture, STFTs and
// the ideal binary mask of source 0.
struct Scene {
  FrameSettings settings;
  int64_t length = 4000;
  torch::Tensor sources;   // [2, N] double
  torch::Tensor mixture;   // [N]
  torch::Tensor spectrum;  // complex [T, F] of the mixture
  torch::Tensor ibm;       // bool [T, F], true where source 0 dominates
  torch::Tensor usedbins;  // bool [T, F], within 40 dB of the loudest mixture bin
  int64_t frames = 0, bins = 0;

  Scene() {
    auto n = torch::arange(length, torch::kFloat64) / settings.sample_rate;
    auto low = torch::sin(2 * M_PI * 300 * n) + 0.6 * torch::sin(2 * M_PI * 650 * n + 1.0);
    auto high = 0.8 * torch::sin(2 * M_PI * 2100 * n) + 0.5 * torch::sin(2 * M_PI * 3100 * n);
    low = low * (1.0 + 0.5 * torch::sin(2 * M_PI * 3 * n));
    high = high * (1.0 + 0.5 * torch::cos(2 * M_PI * 5 * n));
    sources = torch::stack({low, high});
    mixture = low + high;
    auto stft = [&](const torch::Tensor& x) {
      return frames_spectrum(frame_signal(x, settings), settings.nfft);
    };
    spectrum = stft(mixture);
    ibm = stft(low).abs() > stft(high).abs();
    auto magnitude = spectrum.abs();
    usedbins = 20 * torch::log10(magnitude + 1e-12) > 20 * std::log10(magnitude.max().item<double>()) - 40;
    frames = spectrum.size(0);
    bins = spectrum.size(1);
  }

  // Per bin [T, F, S] one-hot of the dominant speaker.
  torch::Tensor one_hot() const {
    return torch::stack({ibm, ibm.logical_not()}, -1).to(torch::kFloat64);
  }

  // Mean over speakers of the SI-SDR of the best matching reconstruction.
  double separation_quality(const torch::Tensor& masks) const {
    auto signals = masks_to_signals(masks, spectrum, settings, length);
    auto scores = si_sdr_sources(sources, signals);
    return 0.5 * (scores.sdr[0] + scores.sdr[1]);
  }

  // Fraction of bins where the masks (rounded) agree with the IBM up to a speaker swap.
  double ibm_agreement(const torch::Tensor& masks) const {
    auto speaker0 = masks[0] > 0.5;
    double same = (speaker0 == ibm).to(torch::kFloat64).mean().item<double>();
    return std::max(same, 1.0 - same);
  }
};

// Oracle embeddings [T, F*D]: one-hot speaker in the first two dimensions, noise elsewhere.
torch::Tensor oracle_embeddings(const Scene& scene, int64_t dimension, double scale,
                                double noise) {
  torch::manual_seed(5);
  auto embeddings = noise * torch::randn({scene.frames, scene.bins, dimension}, torch::kFloat64);
  embeddings.slice(2, 0, 2) += scale * scene.one_hot();
  return embeddings;  // [T, F, D]
}

TEST(PostReconstructors, DeepclusteringSeparatesOracleEmbeddings) {
  Scene scene;
  for (const std::string type : {"deepclustering", "deepclustering_flat"}) {
    auto config = parse("[task]\nreconstruct_type = " + type +
                        "\norg_mix = testorgmix\nusedbins = testusedbins\nnrs = 2\n"
                        "store_output = False\n");
    auto reconstructor = make_reconstructor(section_of(config));
    EXPECT_EQ(reconstructor->num_speakers(), 2);
    EXPECT_EQ(reconstructor->org_mix_section(), "testorgmix");
    EXPECT_EQ(reconstructor->usedbins_section(), "testusedbins");
    EXPECT_TRUE(reconstructor->needs_usedbins());
    auto embeddings = oracle_embeddings(scene, 6, 1.0, 0.1);
    if (type == "deepclustering") embeddings = embeddings.reshape({scene.frames, -1});
    auto masks = reconstructor->masks({{"bin_emb", embeddings.to(torch::kFloat32)}}, scene.usedbins);
    ASSERT_EQ(masks.sizes(), (std::vector<int64_t>{2, scene.frames, scene.bins}));
    EXPECT_EQ(masks.scalar_type(), torch::kFloat32);
    // Binary masks that partition the bins.
    EXPECT_TRUE(((masks == 0) | (masks == 1)).all().item<bool>());
    EXPECT_TRUE((masks.sum(0) == 1).all().item<bool>());
    EXPECT_GT(scene.ibm_agreement(masks), 0.99) << type;
    EXPECT_GT(scene.separation_quality(masks), 15.0) << type;
    EXPECT_EQ(reconstructor->last_cluster_centers().sizes(), (std::vector<int64_t>{2, 6}));
  }
}

TEST(PostReconstructors, DeepclusteringClustersOnlyTheUsedBins) {
  // Unused bins carry a third, far-away embedding: if they were clustered, one cluster would
  // be spent on them.
  Scene scene;
  auto embeddings = oracle_embeddings(scene, 3, 1.0, 0.05);
  auto unused = scene.usedbins.logical_not().unsqueeze(-1);
  auto decoy = torch::tensor({0.0, 0.0, 1.0}, torch::kFloat64).expand_as(embeddings);
  embeddings = torch::where(unused, decoy, embeddings);
  ASSERT_GT(unused.sum().item<int64_t>(), 50);
  auto config = parse("[t]\nreconstruct_type = deepclustering\norg_mix = m\nusedbins = u\nnrs = 2\n");
  auto masks = make_reconstructor(section_of(config))
                   ->masks({{"bin_emb", embeddings.reshape({scene.frames, -1})}}, scene.usedbins);
  auto used = scene.usedbins;
  auto speaker0 = masks[0] > 0.5;
  double same = (speaker0 == scene.ibm).logical_and(used).sum().item<double>() /
                used.sum().item<double>();
  EXPECT_GT(std::max(same, 1.0 - same), 0.99);
}

TEST(PostReconstructors, DeepattractornetGivesSoftmaxMasksFromAttractors) {
  Scene scene;
  auto config = parse("[t]\nreconstruct_type = deepattractornet\nactivation = softmax\n"
                      "org_mix = m\nusedbins = u\nnrs = 2\nstore_masks = True\n"
                      "store_output = False\n");
  auto reconstructor = make_reconstructor(section_of(config));
  EXPECT_TRUE(reconstructor->store_masks());
  auto embeddings = oracle_embeddings(scene, 4, 3.0, 0.1).reshape({scene.frames, -1});
  auto masks = reconstructor->masks({{"bin_emb", embeddings}}, scene.usedbins);
  EXPECT_TRUE(torch::allclose(masks.sum(0), torch::ones({scene.frames, scene.bins}), 1e-5, 1e-5));
  // The masks are softmax(A v) with the returned attractors A, checked bin by bin.
  auto attractors = reconstructor->last_cluster_centers();
  auto v = embeddings.reshape({scene.frames, scene.bins, 4});
  for (int64_t t = 0; t < scene.frames; t += 7)
    for (int64_t f = 0; f < scene.bins; f += 11) {
      double a0 = 0, a1 = 0;
      for (int d = 0; d < 4; ++d) {
        a0 += attractors[0][d].item<double>() * v[t][f][d].item<double>();
        a1 += attractors[1][d].item<double>() * v[t][f][d].item<double>();
      }
      double expected = std::exp(a0) / (std::exp(a0) + std::exp(a1));
      ASSERT_NEAR(masks[0][t][f].item<double>(), expected, 1e-5);
    }
  EXPECT_GT(scene.ibm_agreement(masks), 0.99);
  EXPECT_GT(scene.separation_quality(masks), 15.0);
}

TEST(PostReconstructors, StackedmasksLayoutAndActivations) {
  Scene scene;
  // bin_est column s*F + f holds speaker s at bin f (the PIT layout).
  auto ibm = scene.one_hot().permute({0, 2, 1}).reshape({scene.frames, -1});  // [T, S*F]
  auto logits = (2 * ibm - 1) * 8.0;
  for (const std::string activation : {"softmax", "sigmoid", "None"}) {
    std::string key = activation == "sigmoid" ? "output_activation" : "activation";
    auto config = parse("[t]\nreconstruct_type = stackedmasks\norg_mix = m\nnrs = 2\n" + key +
                        " = " + activation + "\nstore_output = False\n");
    auto reconstructor = make_reconstructor(section_of(config));
    EXPECT_FALSE(reconstructor->needs_usedbins());
    auto masks = reconstructor->masks({{"bin_est", logits}}, torch::Tensor());
    ASSERT_EQ(masks.sizes(), (std::vector<int64_t>{2, scene.frames, scene.bins}));
    for (int64_t t = 0; t < scene.frames; t += 5)
      for (int64_t f = 0; f < scene.bins; f += 3) {
        double x0 = logits[t][f].item<double>(), x1 = logits[t][scene.bins + f].item<double>();
        double expected = activation == "softmax"   ? std::exp(x0) / (std::exp(x0) + std::exp(x1))
                          : activation == "sigmoid" ? 1.0 / (1.0 + std::exp(-x0))
                                                    : x0;
        ASSERT_NEAR(masks[0][t][f].item<double>(), expected, 1e-5) << activation;
      }
    if (activation != "None") {
      EXPECT_GT(scene.separation_quality(masks), 15.0) << activation;
    }
  }
  // Default activation is softmax; the [T, F, S] layout is accepted too.
  auto config = parse("[t]\nreconstruct_type = stackedmasks\norg_mix = m\nnrs = 2\n");
  auto masks = make_reconstructor(section_of(config))
                   ->masks({{"only_output", logits.reshape({scene.frames, 2, scene.bins})
                                                .permute({0, 2, 1})}},
                           torch::Tensor());
  EXPECT_TRUE(torch::allclose(masks[0], torch::sigmoid(logits.slice(1, 0, scene.bins) * 2)
                                            .to(torch::kFloat32), 1e-5, 1e-5));
}

TEST(PostReconstructors, DeepclusteringnoiseScalesMasksByTheNoiseFilter) {
  Scene scene;
  torch::manual_seed(8);
  auto noise_filter = torch::where(torch::rand({scene.frames, scene.bins}) > 0.3,
                                   torch::full({scene.frames, scene.bins}, 0.9),
                                   torch::full({scene.frames, scene.bins}, 0.2));
  auto config = parse("[t]\nreconstruct_type = deepclusteringnoise\norg_mix = m\nusedbins = u\n"
                      "nrs = 2\nmin_kmeans_perc = 0.05\nnoise_threshold_for_kmeans = 0.75\n"
                      "store_output = False\n");
  auto reconstructor = make_reconstructor(section_of(config));
  auto embeddings = oracle_embeddings(scene, 5, 1.0, 0.1).reshape({scene.frames, -1});
  auto masks = reconstructor->masks({{"bin_emb", embeddings}, {"noise_filter", noise_filter}},
                                    scene.usedbins);
  EXPECT_TRUE(torch::allclose(masks.sum(0), noise_filter.to(torch::kFloat32)));
  EXPECT_GT(scene.ibm_agreement(masks / noise_filter), 0.99);
  // Every bin is too noisy: the least noisy 5% of the used bins are clustered instead.
  auto quiet = torch::full({scene.frames, scene.bins}, 0.1);
  quiet.index_put_({scene.ibm.logical_and(scene.usedbins)}, 0.5);
  masks = reconstructor->masks({{"bin_emb", embeddings}, {"noise_filter", quiet}}, scene.usedbins);
  EXPECT_TRUE(torch::allclose(masks.sum(0), quiet.to(torch::kFloat32)));
  // Nothing used at all: silent masks (the original's rule for < 2 bins).
  auto none = torch::zeros({scene.frames, scene.bins}, torch::kBool);
  masks = reconstructor->masks({{"bin_emb", embeddings}, {"noise_filter", noise_filter}}, none);
  EXPECT_EQ(masks.abs().sum().item<double>(), 0.0);
}

TEST(PostReconstructors, ConfigurationErrorsNameTheKey) {
  auto expect_error = [](const std::string& text, const std::string& fragment) {
    auto config = parse(text);
    try {
      make_reconstructor(section_of(config));
      ADD_FAILURE() << "no error for:\n" << text;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("reconstructor.cfg:"), std::string::npos) << e.what();
    }
  };
  expect_error("[t]\nreconstruct_type = deepclustring\norg_mix = m\nusedbins = u\nnrs = 2\n",
               "did you mean 'deepclustering'");
  expect_error("[t]\nreconstruct_type = deepclustering\norg_mix = m\nusedbins = u\nnrs = 2\n"
               "usedbin = x\n", "[t] usedbin");
  expect_error("[t]\nreconstruct_type = deepclustering\norg_mix = m\nusedbins = u\n", "nrs");
  expect_error("[t]\nreconstruct_type = deepclustering\norg_mix = m\nnrs = 2\n", "usedbins");
  expect_error("[t]\nreconstruct_type = deepattractornet\norg_mix = m\nusedbins = u\nnrs = 2\n"
               "activation = sigmoid\n", "activation");
  expect_error("[t]\nreconstruct_type = stackedmasks\norg_mix = m\nnrs = 2\n"
               "output_activation = relu\n", "output_activation");
  expect_error("[t]\nreconstruct_type = stackedmasks\norg_mix = m\nnrs = two\n", "nrs");
}

TEST(PostReconstructors, DataErrorsAreClear) {
  Scene scene;
  auto config = parse("[t]\nreconstruct_type = deepclustering\norg_mix = m\nusedbins = u\nnrs = 2\n");
  auto reconstructor = make_reconstructor(section_of(config));
  auto embeddings = oracle_embeddings(scene, 3, 1.0, 0.1).reshape({scene.frames, -1});
  EXPECT_THROW(reconstructor->masks({{"bin_emb", embeddings.slice(0, 1)}}, scene.usedbins), Error);
  EXPECT_THROW(reconstructor->masks({{"bin_emb", embeddings.slice(1, 1)}}, scene.usedbins), Error);
  EXPECT_THROW(reconstructor->masks({{"a", embeddings}, {"b", embeddings}}, scene.usedbins), Error);
  EXPECT_THROW(reconstructor->masks({{"bin_emb", embeddings}}, torch::Tensor()), Error);
}

TEST(PostReconstructors, TheOriginalRecipeSectionsAreAccepted) {
  auto recipe = nabu::testing::reference_recipe_dir();
  if (recipe.empty()) GTEST_SKIP() << "reference recipe not available";
  auto config = ConfigFile::load(recipe / "reconstructor.cfg");
  for (const auto& section : config.sections()) {
    auto reconstructor = make_reconstructor(section);
    EXPECT_GE(reconstructor->num_speakers(), 2) << section.name();
    EXPECT_FALSE(reconstructor->usedbins_section().empty()) << section.name();
  }
}

}  // namespace
