// linear, feedforward, concat, constant_generator and the common model behaviour.
#include <gtest/gtest.h>

#include "nabu/core/error.h"
#include "test_model_helpers.h"

namespace nabu::testing {
namespace {

// Slow reference of an affine map on the last axis: y[..., o] = sum_i x[..., i] w[i, o] + b[o].
torch::Tensor affine_reference(const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b) {
  auto flat = x.reshape({-1, x.size(-1)});
  auto out = torch::zeros({flat.size(0), w.size(1)});
  for (int64_t r = 0; r < flat.size(0); ++r)
    for (int64_t o = 0; o < w.size(1); ++o) {
      double sum = b.defined() ? b[o].item<double>() : 0.0;
      for (int64_t i = 0; i < flat.size(1); ++i)
        sum += flat[r][i].item<double>() * w[i][o].item<double>();
      out[r][o] = sum;
    }
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - 1);
  shape.push_back(w.size(1));
  return out.reshape(shape);
}

TEST(ModelLinear, AffineMapReshapeAndActivation) {
  torch::manual_seed(1);
  auto model = make_model_from(
      "architecture = linear\noutput_dims = 3 2\nactivation_func = sigmoid\ninput_noise = 0\n"
      "dropout = 1.0\n");
  auto x = torch::randn({2, 4, 5});
  auto y = model->run({x}, lengths_of({4, 2}), false);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{2, 4, 3, 2}));
  auto p = parameters_by_name(*model);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p["weights"].sizes(), (std::vector<int64_t>{5, 6}));
  auto expected = torch::sigmoid(affine_reference(x, p["weights"], p["biases"]))
                      .reshape({2, 4, 3, 2});
  EXPECT_LT(max_difference(y, expected), 1e-5);
}

TEST(ModelLinear, NoBiasSoftmaxAndLastOnly) {
  torch::manual_seed(2);
  auto model = make_model_from(
      "architecture = linear\noutput_dims = 4\nno_bias = True\nactivation_func = softmax\n"
      "last_only = True\n");
  auto x = torch::randn({3, 5, 2});
  auto y = model->run({x}, lengths_of({5, 5, 5}), false);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{3, 1, 4}));
  auto p = parameters_by_name(*model);
  EXPECT_EQ(p.count("biases"), 0u);
  auto expected = torch::softmax(affine_reference(x, p["weights"], {}), -1).narrow(1, 4, 1);
  EXPECT_LT(max_difference(y, expected), 1e-5);
  EXPECT_LT(max_difference(y.sum(-1), torch::ones({3, 1})), 1e-5);
}

TEST(ModelLinear, NoiseAndDropoutOnlyInTraining) {
  torch::manual_seed(3);
  auto noisy = make_model_from("architecture = linear\noutput_dims = 6\ninput_noise = 0.5\n");
  auto x = torch::randn({2, 3, 4});
  auto eval1 = noisy->run({x}, {}, false), eval2 = noisy->run({x}, {}, false);
  EXPECT_TRUE(torch::equal(eval1, eval2));
  EXPECT_GT(max_difference(noisy->run({x}, {}, true), eval1), 1e-3);

  auto dropped = make_model_from("architecture = linear\noutput_dims = 400\ndropout = 0.5\n");
  auto clean = dropped->run({x}, {}, false);
  auto train = dropped->run({x}, {}, true);
  auto zeros = (train == 0).sum().item<int64_t>();
  EXPECT_GT(zeros, clean.numel() / 4);
  EXPECT_LT(zeros, clean.numel() * 3 / 4);
  auto kept = train != 0;  // kept values are scaled by 1 / keep
  EXPECT_LT(max_difference(train.masked_select(kept), clean.masked_select(kept) * 2.0), 1e-5);
}

TEST(ModelLinear, RejectsBadConfigurationWithLocation) {
  try {
    make_model_from("architecture = linear\noutput_dim = 3\n");
    FAIL() << "an unknown key must be rejected";
  } catch (const ConfigError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("model.cfg:3"), std::string::npos) << message;
    EXPECT_NE(message.find("output_dims"), std::string::npos) << message;  // did you mean
  }
  try {
    make_model_from("architecture = linear\noutput_dims = 3\nactivation_func = sigmod\n");
    FAIL() << "an unknown activation must be rejected";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("sigmoid"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_model_from("architecture = linear\n"), ConfigError);
  EXPECT_THROW(make_model_from("architecture = linear\noutput_dims = 3\ndropout = 0\n"),
               ConfigError);
  auto model = make_model_from("architecture = linear\noutput_dims = 3\n");
  EXPECT_THROW(model->run({torch::zeros({1, 2, 3}), torch::zeros({1, 2, 3})}, {}, false), Error);
}

TEST(ModelFeedforward, LayersSizesAndActivation) {
  torch::manual_seed(4);
  auto model = make_model_from(
      "architecture = feedforward\nnum_layers = 2\nnum_units = 8\nfac_per_layer = 0.5\n"
      "activation_func = relu\nlayer_norm = False\nrecurrent_dropout = 1.0\n");
  auto x = torch::randn({2, 3, 5});
  auto y = model->run({x}, {}, false);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{2, 3, 4}));
  auto p = parameters_by_name(*model);
  auto h = torch::relu(affine_reference(x, p["layer0_weights"], p["layer0_biases"]));
  auto expected = torch::relu(affine_reference(h, p["layer1_weights"], p["layer1_biases"]));
  EXPECT_LT(max_difference(y, expected), 1e-5);
  expect_gradients_everywhere(*model, {x}, {});
}

TEST(ModelConcat, DefaultExpandsEveryInputButTheFirst) {
  auto model = make_model_from("architecture = concat\n");
  auto features = torch::randn({2, 5, 3});
  auto ivec = torch::randn({2, 4});
  auto y = model->run({features, ivec}, lengths_of({5, 3}), false);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{2, 5, 7}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 5; ++t) {
      EXPECT_TRUE(torch::equal(y[b][t].narrow(0, 0, 3), features[b][t]));
      EXPECT_TRUE(torch::equal(y[b][t].narrow(0, 3, 4), ivec[b]));
    }
  EXPECT_TRUE(model->parameters().empty());
}

TEST(ModelConcat, SelectionFlatteningAndExpandingToAFeatureMap) {
  // The CNN-LSTM recipe: [B,T,F,C] map with a [B,T,H] LSTM output tiled over F.
  auto model = make_model_from(
      "architecture = concat\nselect_inputs = True True\nflatten_last_2_dims = False False\n"
      "expand_dim_to_first_input = False True\n");
  auto map = torch::randn({2, 4, 6, 3});
  auto lstm = torch::randn({2, 4, 5});
  auto y = model->run({map, lstm}, {}, false);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{2, 4, 6, 8}));
  for (int64_t f = 0; f < 6; ++f)
    EXPECT_TRUE(torch::equal(y.select(2, f).narrow(-1, 3, 5), lstm));

  auto flat = make_model_from(
      "architecture = concat\nselect_inputs = False True True\n"
      "flatten_last_2_dims = False True False\nexpand_dim_to_first_input = False False False\n");
  auto a = torch::randn({2, 3, 4}), b = torch::randn({2, 3, 2, 2}), c = torch::randn({2, 3, 1});
  auto z = flat->run({a, b, c}, {}, false);
  EXPECT_TRUE(torch::equal(z, torch::cat({b.reshape({2, 3, 4}), c}, -1)));

  auto short_list = make_model_from("architecture = concat\nflatten_last_2_dims = False\n");
  EXPECT_THROW(short_list->run({a, c}, {}, false), Error);
}

TEST(ModelConcat, PerInputNoiseOnlyInTraining) {
  torch::manual_seed(5);
  auto model = make_model_from(
      "architecture = concat\nexpand_dim_to_first_input = False False\ninput_noise = 0.0 0.3\n");
  auto a = torch::randn({2, 3, 4}), b = torch::randn({2, 3, 4});
  auto eval = model->run({a, b}, {}, false);
  EXPECT_TRUE(torch::equal(eval, torch::cat({a, b}, -1)));
  auto train = model->run({a, b}, {}, true);
  EXPECT_TRUE(torch::equal(train.narrow(-1, 0, 4), a));  // stddev 0: untouched
  EXPECT_GT(max_difference(train.narrow(-1, 4, 4), b), 1e-3);
}

TEST(ModelConstantGenerator, ShapeValueAndTrainingNoise) {
  torch::manual_seed(6);
  auto model = make_model_from(
      "architecture = constant_generator\nconstant_value = -1.0\ntensor_shape = 20\n"
      "include_batch_size = True\noutput_noise = 0.0\n");
  auto y = model->run({torch::zeros({3, 7, 2})}, lengths_of({7, 5, 2}), true);
  EXPECT_TRUE(torch::equal(y, torch::full({3, 20}, -1.0)));
  auto shaped = make_model_from(
      "architecture = constant_generator\nconstant_value = 2\ntensor_shape = 2,3\n"
      "output_noise = 0.1\n");
  EXPECT_TRUE(torch::equal(shaped->run({torch::zeros({1, 1})}, {}, false), torch::full({2, 3}, 2.0)));
  EXPECT_GT(max_difference(shaped->run({torch::zeros({1, 1})}, {}, true), torch::full({2, 3}, 2.0)),
            1e-4);
  EXPECT_THROW(make_model_from("architecture = constant_generator\ntensor_shape = 2x3\n"),
               ConfigError);
}

TEST(ModelCommon, TrainableFalseFreezesParameters) {
  torch::manual_seed(7);
  auto model = make_model_from("architecture = linear\noutput_dims = 3\ntrainable = False\n");
  auto x = torch::randn({2, 3, 4}, torch::requires_grad());
  auto y = model->run({x}, {}, true);
  y.sum().backward();
  for (const auto& parameter : model->parameters()) {
    EXPECT_FALSE(parameter.requires_grad());
    EXPECT_FALSE(parameter.grad().defined());
  }
  EXPECT_TRUE(x.grad().defined());  // gradients still flow through to the inputs
}

// Slow reference of the attractor model with three inputs: for every utterance and speaker, the
// mean of the embedding vectors of the used, real bins that the speaker owns (0 if none).
torch::Tensor attractor_reference(const torch::Tensor& data, const torch::Tensor& owners,
                                  const torch::Tensor& usedbins, const std::vector<int64_t>& lengths) {
  const int64_t B = data.size(0), F = usedbins.size(2);
  const int64_t D = data.size(2) / F, S = owners.size(2) / F;
  auto result = torch::zeros({B, S, D}, torch::kDouble);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      std::vector<double> sum(D, 0.0);
      double count = 0;
      for (int64_t t = 0; t < lengths[b]; ++t)
        for (int64_t f = 0; f < F; ++f) {
          if (!usedbins[b][t][f].item<bool>() || !owners[b][t][f * S + s].item<bool>()) continue;
          count += 1;
          for (int64_t d = 0; d < D; ++d) sum[d] += data[b][t][f * D + d].item<double>();
        }
      for (int64_t d = 0; d < D; ++d) result[b][s][d] = count > 0 ? sum[d] / count : 0.0;
    }
  return result;
}

TEST(ModelAttractor, MeanEmbeddingOfTheUsedBinsEachSpeakerOwns) {
  torch::manual_seed(3);
  const int64_t F = 4, D = 3, S = 2;
  std::vector<int64_t> lengths{5, 3};
  auto data = torch::randn({2, 5, F * D});
  data[1].narrow(0, 3, 2).fill_(1e6);  // padding that must not count
  auto owner = torch::randint(0, S, {2, 5, F});
  auto owners = torch::one_hot(owner, S).to(torch::kBool).reshape({2, 5, F * S});
  auto usedbins = torch::rand({2, 5, F}) > 0.3;
  usedbins[0][0] = false;
  owners[1][0].zero_();  // a speaker may own no bin at all in an utterance
  owners[1][1].zero_();
  owners[1][2].zero_();
  auto model = make_model_from("architecture = attractor\n");
  auto attractors = model->run({data, owners, usedbins}, lengths_of(lengths), true);
  ASSERT_EQ(attractors.sizes(), (std::vector<int64_t>{2, S, D}));
  auto expected = attractor_reference(data, owners, usedbins, lengths);
  EXPECT_LT(max_difference(attractors.to(torch::kDouble), expected), 1e-5);
  EXPECT_EQ(attractors[1].abs().sum().item<double>(), 0.0);  // no owned bin: zero attractor
  EXPECT_TRUE(model->parameters().empty());

  auto normalised = make_model_from("architecture = attractor\nnormalization = True\n")
                        ->run({data, owners, usedbins}, lengths_of(lengths), false);
  auto norms = expected.norm(2, -1, true).clamp_min(1e-6);
  EXPECT_LT(max_difference(normalised[0].to(torch::kDouble), (expected / norms)[0]), 1e-5);
  EXPECT_EQ(normalised[1].abs().sum().item<double>(), 0.0);
}

TEST(ModelAttractor, PerSpeakerEmbeddingsAverageEveryUsedBin) {
  torch::manual_seed(4);
  const int64_t F = 3, D = 2, S = 2, T = 4;
  auto data = torch::randn({1, S, T, F * D});
  auto usedbins = torch::rand({1, T, F}) > 0.5;
  usedbins[0][0][0] = true;
  auto attractors =
      make_model_from("architecture = attractor\n")->run({data, usedbins}, lengths_of({T}), false);
  ASSERT_EQ(attractors.sizes(), (std::vector<int64_t>{1, S, D}));
  double count = usedbins.sum().item<double>();
  for (int64_t s = 0; s < S; ++s)
    for (int64_t d = 0; d < D; ++d) {
      double sum = 0;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t f = 0; f < F; ++f)
          if (usedbins[0][t][f].item<bool>()) sum += data[0][s][t][f * D + d].item<double>();
      EXPECT_NEAR(attractors[0][s][d].item<double>(), sum / count, 1e-5);
    }
}

TEST(ModelAttractor, RejectsInputsThatDoNotFitTheUsedBins) {
  auto model = make_model_from("architecture = attractor\n");
  auto usedbins = torch::ones({2, 5, 4}, torch::kBool);
  auto expect_error = [&](const std::vector<torch::Tensor>& inputs, const std::string& text) {
    try {
      model->run(inputs, lengths_of({5, 5}), false);
      FAIL() << "expected an error containing " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("model 'm' (attractor"), std::string::npos) << e.what();
    }
  };
  expect_error({torch::randn({2, 5, 10}), torch::ones({2, 5, 8}, torch::kBool), usedbins},
               "(10) is not a multiple of F = 4");
  expect_error({torch::randn({2, 5, 12}), torch::ones({2, 5, 7}, torch::kBool), usedbins},
               "(7) is not a multiple of F = 4");
  expect_error({torch::randn({2, 6, 12}), torch::ones({2, 6, 8}, torch::kBool), usedbins},
               "disagree on B or T");
  expect_error({torch::randn({2, 5, 12})}, "expects 2 to 3 input(s), got 1");
  expect_error({torch::randn({2, 5, 12}), usedbins}, "must have 4 dimensions");
}

// Every key the original recipes use (docs/models.md) is accepted by the architectures built here.
TEST(ModelCommon, AcceptsEveryRecipeKey) {
  const std::map<std::string, std::string> sections = {
      {"linear",
       "activation_func = sigmoid\ndropout = 1.0\ninput_noise = 0\nno_bias = True\n"
       "output_dims = 2580\n"},
      {"dblstm",
       "activation_fn = tanh\ndropout = 1.0\nfac_per_layer = 1.0\ninput_noise = 0.2\n"
       "layer_norm = False\nnum_layers = 2\nnum_units = 600\nrecurrent_dropout = 1.0\n"},
      {"concat",
       "expand_dim_to_first_input = False True\nflatten_last_2_dims = False False\n"
       "input_noise = 0.2 0.2\nselect_inputs = True True\n"},
      {"dbresetlstm",
       "backward_reset = True\ndropout = 1.0\nforward_reset = True\ngroup_size = 1 3\n"
       "input_noise = 0.2\nlayer_norm = False\nnum_layers = 2\nnum_units = 600\n"
       "recurrent_dropout = 1.0\nseparate_directions = False\nsymmetric_context = True\n"
       "t_reset = 5 12\n"},
      {"feedforward",
       "activation_func = relu\ndropout = 1.0\nfac_per_layer = 1.0\ninput_noise = 0\n"
       "layer_norm = False\nnum_layers = 2\nnum_units = 100\nrecurrent_dropout = 1.0\n"},
      {"attractor", ""},
      {"leaky_dblstm",
       "dropout = 1.0\ninput_noise = 0.2\nlayer_norm = False\nleak_factor = 0.5\n"
       "num_layers = 2\nnum_units = 600\nrecurrent_dropout = 1.0\n"},
      {"leaky_dblstm_notrec",
       "dropout = 1.0\ninput_noise = 0.2\nlayer_norm = False\nleak_factor = 0.5\n"
       "num_layers = 2\nnum_units = 600\nrecurrent_dropout = 1.0\n"},
      {"leaky_dblstm_iznotrec",
       "dropout = 1.0\ninput_noise = 0.2\nlayer_norm = False\nleak_factor = 0.5\n"
       "num_layers = 2\nnum_units = 600\nrecurrent_dropout = 1.0\n"},
      {"encoder_decoder_cnn",
       "activation_fn = relu\nbypass = unpool\ndropout = 1.0\nf_pool_rate = 1\n"
       "fac_per_layer = 1.0\nfilter_size_f = 15\nfilter_size_f_fac_after_pool = 0.8\n"
       "filter_size_t = 12\nfilter_size_t_fac_after_pool = 0.8\nfilters = 3 3\n"
       "input_noise = 0.2\nlayer_norm = False\nnum_centre_layers = 2\n"
       "num_encoder_layers = 3\nnum_filters_1st_layer = 114\nnum_output_filters = 80\n"
       "t_pool_rate = 2\n"},
      {"constant_generator",
       "constant_value = 0.0\ninclude_batch_size = True\noutput_noise = 0.0\n"
       "tensor_shape = 20\n"},
      {"dbrnn",
       "dropout = 1.0\ninput_noise = 0.2\nlayer_norm = False\nnum_layers = 2\n"
       "num_units = 600\nrecurrent_dropout = 1.0\n"},
      {"dbresetlstm_insert_additional_input",
       "combine_layer = 2\ndropout = 1.0\ngroup_size = 1\ninput_noise = 0.2\n"
       "layer_norm = False\nnum_layers = 2\nnum_units = 600\nrecurrent_dropout = 1.0\n"
       "symmetric_context = True\nt_reset = 10\n"},
  };
  for (const auto& [architecture, body] : sections) {
    auto config = ConfigFile::parse("[m]\narchitecture = " + architecture + "\n" + body,
                                    "model.cfg");
    auto problems = model_registry().check(architecture, config.section("m"));
    EXPECT_TRUE(problems.empty()) << architecture << ": " << problems.front();
    EXPECT_NO_THROW(model_registry().create(architecture, "m", config.section("m")))
        << architecture;
  }
  for (const char* architecture : {"dlstm", "dbgru"})
    EXPECT_TRUE(model_registry().contains(architecture));
}

}  // namespace
}  // namespace nabu::testing
