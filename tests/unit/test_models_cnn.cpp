// encoder_decoder_cnn: TensorFlow 'same' convolutions, pooling and max-unpooling against loops
// written here, the recipe configurations' shapes, and padding invariance.
#include <gtest/gtest.h>

#include "nabu/core/error.h"
#include "test_model_helpers.h"

namespace nabu::testing {
namespace {

// TF 'same' convolution at stride 1 of x [Ci, T, F] with w [Co, Ci, kt, kf]: the odd extra
// padding goes after.
torch::Tensor conv_same_reference(const torch::Tensor& x, const torch::Tensor& w,
                                  const torch::Tensor& b) {
  const int64_t co = w.size(0), ci = w.size(1), kt = w.size(2), kf = w.size(3);
  const int64_t frames = x.size(1), bins = x.size(2);
  const int64_t before_t = (kt - 1) / 2, before_f = (kf - 1) / 2;
  auto y = torch::zeros({co, frames, bins});
  auto xa = x.accessor<float, 3>();
  auto wa = w.accessor<float, 4>();
  for (int64_t o = 0; o < co; ++o)
    for (int64_t t = 0; t < frames; ++t)
      for (int64_t f = 0; f < bins; ++f) {
        double sum = b[o].item<double>();
        for (int64_t i = 0; i < ci; ++i)
          for (int64_t a = 0; a < kt; ++a)
            for (int64_t c = 0; c < kf; ++c) {
              int64_t st = t + a - before_t, sf = f + c - before_f;
              if (st >= 0 && st < frames && sf >= 0 && sf < bins) sum += xa[i][st][sf] * wa[o][i][a][c];
            }
        y[o][t][f] = sum;
      }
  return y;
}

// TF 'same' transposed convolution at stride 1 of x [Ci, T, F] with w [Ci, Co, kt, kf]: the full
// transposed convolution cropped from (k - 1) / 2.
torch::Tensor transposed_same_reference(const torch::Tensor& x, const torch::Tensor& w,
                                        const torch::Tensor& b) {
  const int64_t ci = w.size(0), co = w.size(1), kt = w.size(2), kf = w.size(3);
  const int64_t frames = x.size(1), bins = x.size(2);
  auto full = torch::zeros({co, frames + kt - 1, bins + kf - 1});
  auto xa = x.accessor<float, 3>();
  auto wa = w.accessor<float, 4>();
  auto fa = full.accessor<float, 3>();
  for (int64_t i = 0; i < ci; ++i)
    for (int64_t t = 0; t < frames; ++t)
      for (int64_t f = 0; f < bins; ++f)
        for (int64_t o = 0; o < co; ++o)
          for (int64_t a = 0; a < kt; ++a)
            for (int64_t c = 0; c < kf; ++c) fa[o][t + a][f + c] += xa[i][t][f] * wa[i][o][a][c];
  return full.narrow(1, (kt - 1) / 2, frames).narrow(2, (kf - 1) / 2, bins) +
         b.view({-1, 1, 1});
}

// 2x2 max pooling ('valid') followed by max-unpooling: each window's maximum keeps its value
// and position, everything else (and the uncovered last odd row/column) becomes zero.
torch::Tensor pool_unpool_reference(const torch::Tensor& x) {
  auto y = torch::zeros_like(x);
  for (int64_t c = 0; c < x.size(0); ++c)
    for (int64_t t = 0; t + 1 < x.size(1); t += 2)
      for (int64_t f = 0; f + 1 < x.size(2); f += 2) {
        int64_t best_t = t, best_f = f;
        for (int64_t a = 0; a < 2; ++a)
          for (int64_t d = 0; d < 2; ++d)
            if (x[c][t + a][f + d].item<float>() > x[c][best_t][best_f].item<float>())
              best_t = t + a, best_f = f + d;
        y[c][best_t][best_f] = x[c][best_t][best_f];
      }
  return y;
}

TEST(ModelEncoderDecoderCnn, OneLayerMatchesSameConvolutionsAndUnpooling) {
  torch::manual_seed(31);
  auto model = make_model_from(
      "architecture = encoder_decoder_cnn\nnum_encoder_layers = 1\nnum_centre_layers = 0\n"
      "num_filters_1st_layer = 3\nnum_output_filters = 2\nfilters = 3 2\nt_pool_rate = 1\n"
      "f_pool_rate = 1\nbypass = unpool\nactivation_fn = relu\n");
  auto x = torch::randn({1, 5, 4});
  auto y = model->run({x}, lengths_of({5}), false);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{1, 5, 4, 2}));
  auto p = parameters_by_name(*model);
  auto encoded = torch::relu(conv_same_reference(x[0].unsqueeze(0), p.at("encoder0_kernel"),
                                                 p.at("encoder0_bias")));
  auto unpooled = pool_unpool_reference(encoded);
  auto decoded = torch::relu(
      transposed_same_reference(unpooled, p.at("decoder0_kernel"), p.at("decoder0_bias")));
  EXPECT_LT(max_difference(y[0].permute({2, 0, 1}), decoded), 1e-5);
}

TEST(ModelEncoderDecoderCnn, StridedDecoderRepeatsTheLastFrame) {
  torch::manual_seed(32);
  // One encoder layer pooling in time only; the decoder upsamples by 2 and the odd last frame
  // is a copy of the one before.
  auto model = make_model_from(
      "architecture = encoder_decoder_cnn\nnum_encoder_layers = 1\nnum_centre_layers = 0\n"
      "num_filters_1st_layer = 2\nnum_output_filters = 2\nfilters = 2 2\nt_pool_rate = 1\n"
      "f_pool_rate = 2\nbypass = False\nactivation_fn = tanh\n");
  auto y = model->run({torch::randn({1, 7, 3})}, lengths_of({7}), false);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{1, 7, 3, 2}));
  EXPECT_TRUE(torch::equal(y[0][6], y[0][5]));
  EXPECT_FALSE(torch::equal(y[0][5], y[0][4]));
}

TEST(ModelEncoderDecoderCnn, RecipeConfigurationsShapesPaddingAndGradients) {
  const std::vector<std::string> bodies = {
      // InterSpeech2019 hyper-parameter search (sizes reduced)
      "bypass = unpool\nnum_filters_1st_layer = 4\nnum_output_filters = 3\nfac_per_layer = 1.0\n"
      "filter_size_t = 4\nfilter_size_t_fac_after_pool = 0.8\nfilter_size_f = 5\n"
      "filter_size_f_fac_after_pool = 0.8\nnum_encoder_layers = 2\nnum_centre_layers = 0\n"
      "f_pool_rate = 1\nt_pool_rate = 3\nactivation_fn = relu\ninput_noise = 0.2\n"
      "dropout = 1.0\nlayer_norm = False\n",
      // SS/DCNN (sizes reduced; its section gives no bypass or num_output_filters)
      "num_filters_1st_layer = 3\nfilters = 3 3\nnum_encoder_layers = 3\nnum_centre_layers = 2\n"
      "f_pool_rate = 1\nt_pool_rate = 2\nactivation_fn = relu\ninput_noise = 0.2\n"
      "dropout = 1.0\nlayer_norm = False\n",
      "bypass = True\nnum_filters_1st_layer = 2\nfac_per_layer = 2.0\nnum_output_filters = 2\n"
      "filters = 3 3\nnum_encoder_layers = 2\nnum_centre_layers = 1\nf_pool_rate = 2\n"
      "t_pool_rate = 1\nlayer_norm = True\nactivation_fn = sigmoid\n",
  };
  const std::vector<int64_t> channels = {3, 3, 2};
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    SCOPED_TRACE(bodies[i]);
    torch::manual_seed(33);
    auto model = make_model_from("architecture = encoder_decoder_cnn\n" + bodies[i]);
    std::vector<int64_t> lengths{13, 8, 5, 1};
    auto x = padded_batch(lengths, 9);
    auto y = model->run({x}, lengths_of(lengths), false);
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{4, 13, 9, channels[i]}));
    expect_padding_invariant(*model, x, lengths);
    expect_gradients_everywhere(*model, {x}, lengths_of(lengths));
  }
}

TEST(ModelEncoderDecoderCnn, RejectsMissingKernelAndDropout) {
  EXPECT_THROW(make_model_from("architecture = encoder_decoder_cnn\nnum_encoder_layers = 1\n"
                               "num_filters_1st_layer = 2\n"),
               ConfigError);
  EXPECT_THROW(make_model_from("architecture = encoder_decoder_cnn\nnum_encoder_layers = 1\n"
                               "num_filters_1st_layer = 2\nfilters = 3 3\ndropout = 0.5\n"),
               ConfigError);
  EXPECT_THROW(make_model_from("architecture = encoder_decoder_cnn\nnum_encoder_layers = 1\n"
                               "num_filters_1st_layer = 2\nfilters = 3 3\nbypass = yes\n"),
               ConfigError);
}

}  // namespace
}  // namespace nabu::testing
