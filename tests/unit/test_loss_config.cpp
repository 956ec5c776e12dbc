// The loss.cfg indirection (docs/trainer.md) and option checking, the classification and regression
// losses against plain loops, and the edge cases that must stay finite (no used bins, silent
// speakers, empty utterances, zero outputs).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/error.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "test_helpers.h"
#include "test_loss_helpers.h"

using namespace nabu;
using namespace nabu::testing;

namespace {

ConfigFile trainer_with(const std::string& loss_type) {
  return ConfigFile::parse("[task_2spk]\nloss_type = " + loss_type + "\n", "trainer.cfg");
}

// ---- make_loss and loss.cfg --------------------------------------------------------------------

TEST(LossConfig, SectionIndirectionPicksClassAndOptions) {
  auto trainer = trainer_with("mypit");
  auto losses = ConfigFile::parse(
      "[deepclustering]\nloss_type = deepclustering\n\n[mypit]\nloss_type = pit\n"
      "activation = None\nlogits_name = est\n",
      "loss.cfg");
  auto loss = make_loss(trainer.section("task_2spk"), &losses);
  EXPECT_EQ(loss->output_names(), std::vector<std::string>{"est"});
  EXPECT_EQ(loss->target_names(), (std::vector<std::string>{"multi_targets", "mix_to_mask"}));
  // activation None: the logits are the masks, so logits 1 on the mixture reproduce the sources
  // exactly when each source equals the mixture.
  auto mixture = torch::rand({1, 2, 3}, f64());
  auto sources = torch::stack({mixture, mixture}, 3);
  auto result = (*loss)({{"multi_targets", sources}, {"mix_to_mask", mixture}},
                        {{"est", torch::ones({1, 2, 6}, f64())}}, lengths_tensor({2}));
  EXPECT_EQ(result.loss.item<double>(), 0.0);
  EXPECT_EQ(resolve_loss_type(trainer.section("task_2spk"), &losses), "pit");
}

TEST(LossConfig, WithoutLossCfgTheTypeIsTheClassWithDefaults) {
  auto trainer = trainer_with("pit");
  auto loss = make_loss(trainer.section("task_2spk"), nullptr);
  EXPECT_EQ(loss->output_names(), std::vector<std::string>{"bin_est"});
  // Default activation is softmax: equal logits give masks 1/2.
  auto mixture = torch::ones({1, 1, 2}, f64());
  auto sources = torch::full({1, 1, 2, 2}, 0.5, f64());
  auto result = (*loss)({{"multi_targets", sources}, {"mix_to_mask", mixture}},
                        {{"bin_est", torch::zeros({1, 1, 4}, f64())}}, lengths_tensor({1}));
  EXPECT_NEAR(result.loss.item<double>(), 0.0, 1e-15);
  EXPECT_EQ(result.norm.item<double>(), 1.0 * 2 * 2);
  auto danet = make_loss(trainer_with("deepattractornet").section("task_2spk"), nullptr);
  EXPECT_EQ(danet->output_names(), std::vector<std::string>{"bin_emb"});
}

TEST(LossConfig, UnknownLossNameListsKnownNames) {
  auto losses = ConfigFile::parse("[dc]\nloss_type = deepclustring\n", "loss.cfg");
  auto message =
      error_of([&] { make_loss(trainer_with("dc").section("task_2spk"), &losses); });
  EXPECT_NE(message.find("loss.cfg:2"), std::string::npos) << message;
  EXPECT_NE(message.find("'deepclustring'"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean 'deepclustering'"), std::string::npos) << message;
  EXPECT_NE(message.find("known:"), std::string::npos) << message;
  for (const char* name : {"crossentropy_multi", "deepattractornet", "dummy", "l1", "mse", "pit"})
    EXPECT_NE(message.find(name), std::string::npos) << name;

  auto without = error_of([&] { make_loss(trainer_with("pitt").section("task_2spk"), nullptr); });
  EXPECT_NE(without.find("trainer.cfg:2"), std::string::npos) << without;
  EXPECT_NE(without.find("did you mean 'pit'"), std::string::npos) << without;

  auto missing = error_of([&] { make_loss(trainer_with("pi").section("task_2spk"), &losses); });
  EXPECT_NE(missing.find("[pi]"), std::string::npos) << missing;
}

TEST(LossConfig, UnknownOptionKeyIsNamed) {
  auto losses = ConfigFile::parse("[pit]\nloss_type = pit\nactivaton = softmax\n", "loss.cfg");
  auto message = error_of([&] { make_loss(trainer_with("pit").section("task_2spk"), &losses); });
  EXPECT_NE(message.find("loss.cfg:3"), std::string::npos) << message;
  EXPECT_NE(message.find("activaton"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean 'activation'"), std::string::npos) << message;
  // The same problem is reported by the registry checker that `nabu check` uses.
  ConfigSection options("", {});
  resolve_loss_type(trainer_with("pit").section("task_2spk"), &losses, &options);
  EXPECT_EQ(loss_registry().check("pit", options).size(), 1u);
}

TEST(LossConfig, BadValuesAreConfigErrors) {
  auto activation = error_of([] { make_test_loss("pit", "activation = sofmax\n"); });
  EXPECT_NE(activation.find("activation"), std::string::npos) << activation;
  EXPECT_NE(activation.find("softmax"), std::string::npos) << activation;
  EXPECT_THROW(make_test_loss("deepattractornet", "activation = relu\n"), ConfigError);
  EXPECT_THROW(make_test_loss("pit", "no_perm = yes\n"), ConfigError);
  EXPECT_THROW(make_test_loss("deepclustering", "activation = softmax\n"), ConfigError);
}

TEST(LossConfig, OriginalRecipeKeysAreAccepted) {
  // docs/losses.md: the keys the original recipes put in loss.cfg.
  auto losses = ConfigFile::parse(
      "[deepclustering]\nloss_type = deepclustering\n"
      "[pit]\nloss_type = pit\nactivation = softmax\n"
      "[deepattractornet]\nloss_type = deepattractornet\nactivation = softmax\n"
      "[crossentropy_multi]\nloss_type = crossentropy_multi\nallow_permutation = False\n"
      "[dummy]\nloss_type = dummy\n",
      "loss.cfg");
  for (const auto& name : losses.section_names()) {
    auto trainer = trainer_with(name);
    EXPECT_NO_THROW(make_loss(trainer.section("task_2spk"), &losses)) << name;
    ConfigSection options("", {});
    auto type = resolve_loss_type(trainer.section("task_2spk"), &losses, &options);
    EXPECT_TRUE(loss_registry().check(type, options).empty()) << name;
  }
  for (const char* name : {"deepclustering", "deepclustering_flat", "pit", "deepattractornet",
                           "l41", "crossentropy", "crossentropy_multi", "deepclusteringnoise",
                           "dummy", "dummy_loss", "mse", "l1"})
    EXPECT_TRUE(loss_registry().contains(name)) << name;
}

// ---- crossentropy ------------------------------------------------------------------------------

double log_softmax_at(const torch::Tensor& logits, int64_t label) {
  double total = 0;
  for (int64_t c = 0; c < logits.size(0); ++c) total += std::exp(logits[c].item<double>());
  return logits[label].item<double>() - std::log(total);
}

TEST(LossCrossEntropy, MatchesLoopsWithAndWithoutTimeAveraging) {
  torch::manual_seed(40);
  auto labels = torch::tensor({{2.0}, {0.0}, {4.0}}, f64());
  auto logits = torch::randn({3, 5}, f64());
  auto result = (*make_test_loss("crossentropy"))({{"spkids", labels}}, {{"spkest", logits}},
                                                  lengths_tensor({4, 4, 4}));
  double expected = 0;
  for (int64_t b = 0; b < 3; ++b)
    expected -= log_softmax_at(logits[b], static_cast<int64_t>(labels[b][0].item<double>()));
  EXPECT_NEAR(result.loss.item<double>(), expected, 1e-12);
  EXPECT_EQ(result.norm.item<double>(), 3.0);

  std::vector<int64_t> lengths = {4, 2, 3};
  auto frame_logits = torch::randn({3, 4, 5}, f64());
  auto loss = make_test_loss("crossentropy", "av_anchors_time_flag = True\n");
  auto averaged =
      (*loss)({{"spkids", labels}}, {{"spkest", frame_logits}}, lengths_tensor(lengths));
  double expected_avg = 0;
  for (int64_t b = 0; b < 3; ++b) {
    auto mean = torch::zeros({5}, f64());
    for (int64_t t = 0; t < lengths[b]; ++t) mean += frame_logits[b][t];
    mean /= static_cast<double>(lengths[b]);
    expected_avg -= log_softmax_at(mean, static_cast<int64_t>(labels[b][0].item<double>()));
  }
  EXPECT_NEAR(averaged.loss.item<double>(), expected_avg, 1e-12);
  auto gradient = expect_gradient_matches(
      [&](const torch::Tensor& x) {
        return (*loss)({{"spkids", labels}}, {{"spkest", x}}, lengths_tensor(lengths)).loss;
      },
      frame_logits);
  expect_zero_on_padding(gradient, lengths);
  EXPECT_THROW((*make_test_loss("crossentropy"))({{"spkids", torch::tensor({{5.0}}, f64())}},
                                                 {{"spkest", torch::randn({1, 5}, f64())}},
                                                 lengths_tensor({1})),
               Error);
}

// Plain loops: per permutation, mean over speakers (and real frames) of the cross-entropies.
double crossentropy_multi_reference(const torch::Tensor& labels, const torch::Tensor& logits,
                                    const std::vector<int64_t>& lengths, bool permute) {
  const int64_t batch = labels.size(0), speakers = labels.size(1);
  double total = 0;
  for (int64_t b = 0; b < batch; ++b) {
    auto orders = permutations_of(speakers);
    if (!permute) orders.resize(1);
    double best = std::numeric_limits<double>::infinity();
    for (const auto& order : orders) {
      double cost = 0;
      if (logits.dim() == 3) {
        for (int64_t s = 0; s < speakers; ++s)
          cost -= log_softmax_at(logits[b][order[s]], labels[b][s].item<int64_t>());
        cost /= static_cast<double>(speakers);
      } else {
        for (int64_t t = 0; t < lengths[b]; ++t)
          for (int64_t s = 0; s < speakers; ++s)
            cost -= log_softmax_at(logits[b][t][order[s]], labels[b][s].item<int64_t>());
        cost /= static_cast<double>(speakers * lengths[b]);
      }
      best = std::min(best, cost);
    }
    total += best;
  }
  return total;
}

TEST(LossCrossEntropyMulti, MatchesLoopsForBothRanksAndPermutationSettings) {
  torch::manual_seed(41);
  std::vector<int64_t> lengths = {3, 1, 2};
  auto labels = torch::tensor({{1, 3}, {0, 0}, {2, 1}}, torch::kLong);
  auto logits3 = torch::randn({3, 2, 4}, f64());
  auto logits4 = torch::randn({3, 3, 2, 4}, f64());
  for (bool permute : {true, false}) {
    auto loss = make_test_loss("crossentropy_multi",
                               std::string("allow_permutation = ") + (permute ? "True" : "False"));
    for (const auto& logits : {logits3, logits4}) {
      auto result = (*loss)({{"spkids", labels}}, {{"spkest", logits}}, lengths_tensor(lengths));
      double expected = crossentropy_multi_reference(labels, logits, lengths, permute);
      EXPECT_NEAR(result.loss.item<double>(), expected, 1e-12) << permute << logits.dim();
      EXPECT_EQ(result.norm.item<double>(), 3.0);
    }
    auto gradient = expect_gradient_matches(
        [&](const torch::Tensor& x) {
          return (*loss)({{"spkids", labels}}, {{"spkest", x}}, lengths_tensor(lengths)).loss;
        },
        logits4);
    expect_zero_on_padding(gradient, lengths);
  }
  // resh_logits: [B, S*C] reshaped to [B, S, C].
  auto reshaped = (*make_test_loss("crossentropy_multi", "resh_logits = True\n"))(
      {{"spkids", labels}}, {{"spkest", logits3.reshape({3, 8})}}, lengths_tensor(lengths));
  EXPECT_NEAR(reshaped.loss.item<double>(),
              crossentropy_multi_reference(labels, logits3, lengths, true), 1e-12);
  // Four speakers go through the assignment solver and still equal brute force.
  auto labels4 = torch::randint(5, {2, 4}, torch::kLong);
  auto logits44 = torch::randn({2, 4, 5}, f64());
  auto four = (*make_test_loss("crossentropy_multi"))({{"spkids", labels4}},
                                                      {{"spkest", logits44}}, lengths_tensor({1, 1}));
  EXPECT_NEAR(four.loss.item<double>(),
              crossentropy_multi_reference(labels4, logits44, {1, 1}, true), 1e-12);
}

// ---- mse, l1, dummy ----------------------------------------------------------------------------

TEST(LossRegression, MseAndL1SumRealFramesOnly) {
  torch::manual_seed(42);
  std::vector<int64_t> lengths = {4, 2};
  auto target = torch::randn({2, 4, 3, 2}, f64());
  auto output = torch::randn({2, 4, 3, 2}, f64());
  double squared = 0, absolute = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < lengths[b]; ++t)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 2; ++j) {
          double e = output[b][t][i][j].item<double>() - target[b][t][i][j].item<double>();
          squared += e * e;
          absolute += std::abs(e);
        }
  auto mse = make_test_loss("mse");
  auto result = (*mse)({{"clean", target}}, {{"est", output}}, lengths_tensor(lengths));
  EXPECT_NEAR(result.loss.item<double>(), squared, 1e-12);
  EXPECT_EQ(result.norm.item<double>(), 6.0 * 3 * 2);
  auto l1 = make_test_loss("l1", "target = clean\noutput = est\n");
  EXPECT_EQ(l1->target_names(), std::vector<std::string>{"clean"});
  auto l1_result = (*l1)({{"clean", target}, {"other", target}}, {{"est", output}},
                         lengths_tensor(lengths));
  EXPECT_NEAR(l1_result.loss.item<double>(), absolute, 1e-12);
  for (const auto& loss : {mse, l1}) {
    auto gradient = expect_gradient_matches(
        [&](const torch::Tensor& x) {
          return (*loss)({{"clean", target}}, {{"est", x}}, lengths_tensor(lengths)).loss;
        },
        output);
    expect_zero_on_padding(gradient, lengths);
  }
  // Several targets and no `target` option: ambiguous, so an error naming the option.
  auto message = error_of([&] {
    (*mse)({{"a", target}, {"b", target}}, {{"est", output}}, lengths_tensor(lengths));
  });
  EXPECT_NE(message.find("target = NAME"), std::string::npos) << message;
  EXPECT_THROW((*mse)({{"a", target}}, {{"est", output.narrow(2, 0, 2)}}, lengths_tensor(lengths)),
               Error);
}

TEST(LossRegression, DummyIsZeroOverOne) {
  for (const char* name : {"dummy", "dummy_loss"}) {
    auto result = (*make_test_loss(name))({}, {}, lengths_tensor({3}));
    EXPECT_EQ(result.loss.item<double>(), 0.0);
    EXPECT_EQ(result.norm.item<double>(), 1.0);
  }
}

// ---- edge cases: everything stays finite -------------------------------------------------------

void expect_finite(const LossResult& result, const torch::Tensor& input, const std::string& what) {
  EXPECT_TRUE(std::isfinite(result.loss.item<double>())) << what;
  EXPECT_TRUE(std::isfinite(result.norm.item<double>())) << what;
  auto gradient = torch::autograd::grad({result.loss}, {input}, {}, {}, /*allow_unused=*/true)[0];
  if (gradient.defined()) {
    EXPECT_TRUE(torch::isfinite(gradient).all().item<bool>()) << what;
  }
}

TEST(LossEdgeCases, NoUsedBinsSilentSpeakersEmptyUtterancesZeroOutputs) {
  torch::manual_seed(50);
  const int64_t B = 3, T = 4, F = 3, S = 2, D = 2;
  // Utterance 0: no used bins; 1: speaker 1 silent everywhere; 2: length 0.
  std::vector<int64_t> lengths = {4, 3, 0};
  auto binary = random_binary_targets(B, T, F, S, {{}, {1}, {}});
  auto used = random_usedbins(B, T, F, 1.0);
  used[0].fill_(false);
  auto sources = torch::rand({B, T, F, S}, f64());
  sources.select(3, 1)[1].fill_(0.0);
  auto mixture = sources.sum(3);
  mixture[0].fill_(0.0);  // a silent mixture too
  auto targets = TensorMap{{"binary_targets", binary}, {"usedbins", used},
                           {"multi_targets", sources}, {"mix_to_mask", mixture},
                           {"noisybins", torch::ones({B, T, F}, torch::kBool)},
                           {"rel_speech_targets", torch::zeros({B, T, F}, f64())}};
  auto seq = lengths_tensor(lengths);

  for (bool zero : {false, true}) {
    auto make = [&](std::vector<int64_t> shape) {
      auto x = zero ? torch::zeros(shape, f64()) : torch::randn(shape, f64());
      return x.requires_grad_(true);
    };
    auto emb = make({B, T, F * D});
    expect_finite((*make_test_loss("deepclustering"))(targets, {{"bin_emb", emb}}, seq), emb,
                  "deepclustering");
    auto flat = make({B, T, F, D});
    expect_finite((*make_test_loss("deepclustering_flat"))(targets, {{"bin_emb", flat}}, seq),
                  flat, "deepclustering_flat");
    auto alpha = make({B, T, F});
    expect_finite((*make_test_loss("deepclusteringnoise"))(
                      targets, {{"bin_emb", emb}, {"noise_filter", alpha}}, seq),
                  emb, "deepclusteringnoise");
    expect_finite((*make_test_loss("l41"))(
                      targets, {{"bin_emb", emb}, {"spk_emb", make({B, 1, D * S})}}, seq),
                  emb, "l41");
    for (std::string options : {"", "activation = sigmoid\nrescale_recs = True\n",
                                "activation = None\nno_perm = True\n"}) {
      auto est = make({B, T, F * S});
      expect_finite((*make_test_loss("pit", options))(targets, {{"bin_est", est}}, seq), est,
                    "pit " + options);
    }
    for (std::string options : {"", "frame_based = True\n", "activation = sigmoid\n"}) {
      expect_finite((*make_test_loss("deepattractornet", options))(targets, {{"bin_emb", emb}},
                                                                   seq),
                    emb, "deepattractornet " + options);
    }
    auto spk = make({B, T, S, 3});
    expect_finite((*make_test_loss("crossentropy_multi"))(
                      {{"spkids", torch::zeros({B, S}, torch::kLong)}}, {{"spkest", spk}}, seq),
                  spk, "crossentropy_multi");
    auto est = make({B, T, F});
    expect_finite((*make_test_loss("mse"))({{"x", mixture}}, {{"y", est}}, seq), est, "mse");
    expect_finite((*make_test_loss("l1"))({{"x", mixture}}, {{"y", est}}, seq), est, "l1");
  }
}

TEST(LossEdgeCases, GarbageInPaddingChangesNothing) {
  torch::manual_seed(51);
  const int64_t B = 2, T = 5, F = 3, S = 2, D = 2;
  std::vector<int64_t> lengths = {5, 2};
  auto targets = TensorMap{{"binary_targets", random_binary_targets(B, T, F, S)},
                           {"usedbins", random_usedbins(B, T, F)},
                           {"multi_targets", torch::rand({B, T, F, S}, f64())},
                           {"noisybins", random_usedbins(B, T, F, 0.3)},
                           {"rel_speech_targets", torch::rand({B, T, F}, f64())},
                           {"spkids", torch::tensor({{0, 1}, {1, 2}}, torch::kLong)}};
  targets["mix_to_mask"] = targets["multi_targets"].sum(3);
  auto outputs = TensorMap{{"bin_emb", torch::randn({B, T, F * D}, f64())},
                           {"noise_filter", torch::rand({B, T, F}, f64())},
                           {"bin_est", torch::randn({B, T, F * S}, f64())},
                           {"spkest", torch::randn({B, T, S, 3}, f64())}};
  // The same batch with the padded frames of utterance 1 overwritten by other values.
  auto scramble = [&](TensorMap map) {
    for (auto& [name, tensor] : map) {
      if (tensor.dim() < 2 || tensor.size(1) != T) continue;
      tensor = tensor.clone();
      auto tail = tensor[1].narrow(0, 2, T - 2);
      if (tensor.scalar_type() == torch::kBool)
        tail.copy_(torch::rand(tail.sizes(), f64()) < 0.5);
      else
        tail.copy_(torch::rand(tail.sizes(), f64()) * 7.0);
    }
    return map;
  };
  auto other_targets = scramble(targets);
  auto other_outputs = scramble(outputs);
  for (const char* name : {"deepclustering", "deepclusteringnoise", "pit", "deepattractornet",
                           "crossentropy_multi"}) {
    auto loss = make_test_loss(name);
    auto a = (*loss)(targets, outputs, lengths_tensor(lengths));
    auto b = (*loss)(other_targets, other_outputs, lengths_tensor(lengths));
    EXPECT_NEAR(a.loss.item<double>(), b.loss.item<double>(), 1e-9 * std::abs(a.loss.item<double>()))
        << name;
    EXPECT_EQ(a.norm.item<double>(), b.norm.item<double>()) << name;
  }
}

// Not part of the suite (run with --gtest_also_run_disabled_tests): forward and backward of the
// deep clustering loss at recipe size [B=32, T=400, F=129, D=20].
TEST(LossSpeed, DISABLED_DeepClusteringRecipeSize) {
  torch::manual_seed(52);
  const int64_t B = 32, T = 400, F = 129, D = 20, S = 2;
  auto targets = TensorMap{{"binary_targets", random_binary_targets(1, T, F, S).expand({B, T, F * S})},
                           {"usedbins", torch::rand({B, T, F}) < 0.7}};
  auto emb = torch::randn({B, T, F * D}).requires_grad_(true);
  auto loss = make_test_loss("deepclustering");
  for (int repeat = 0; repeat < 3; ++repeat) {
    auto start = std::chrono::steady_clock::now();
    auto result = (*loss)(targets, {{"bin_emb", emb}}, torch::full({B}, T, torch::kLong));
    result.loss.backward();
    auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "deepclustering forward+backward: " << seconds << " s\n";
  }
}

}  // namespace
