// tf_gridnet: one GridNet block against a written-out reference (loops in double: layer norms,
// the unfolded BLSTMs cell by cell, the transposed convolutions, the attention head by head, each
// utterance alone), and the whole model's shapes, padding, scale and option errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/models/tf_gridnet.h"
#include "test_model_helpers.h"

namespace nabu {
namespace {

using tf_gridnet::BlockSizes;
using Matrix = std::vector<std::vector<double>>;  // [rows][columns]

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// The block's parameters as double tensors, read through accessors.
struct Parameters {
  std::map<std::string, torch::Tensor> values;
  const torch::Tensor& operator[](const std::string& name) const { return values.at(name); }
};

// One LSTM direction over x [steps][inputs] (PyTorch's gate order i, f, g, o).
Matrix lstm_direction(const Matrix& x, const Parameters& p, const std::string& prefix,
                      const std::string& suffix, bool reverse) {
  auto w_ih = p[prefix + "weight_ih_l0" + suffix], w_hh = p[prefix + "weight_hh_l0" + suffix];
  auto b_ih = p[prefix + "bias_ih_l0" + suffix], b_hh = p[prefix + "bias_hh_l0" + suffix];
  const int64_t hidden = w_hh.size(1), steps = static_cast<int64_t>(x.size());
  std::vector<double> h(hidden, 0.0), c(hidden, 0.0), a(4 * hidden);
  Matrix out(steps, std::vector<double>(hidden));
  for (int64_t k = 0; k < steps; ++k) {
    const int64_t t = reverse ? steps - 1 - k : k;
    for (int64_t g = 0; g < 4 * hidden; ++g) {
      double sum = b_ih[g].item<double>() + b_hh[g].item<double>();
      for (std::size_t j = 0; j < x[t].size(); ++j) sum += w_ih[g][j].item<double>() * x[t][j];
      for (int64_t j = 0; j < hidden; ++j) sum += w_hh[g][j].item<double>() * h[j];
      a[g] = sum;
    }
    for (int64_t u = 0; u < hidden; ++u) {
      c[u] = sigmoid(a[hidden + u]) * c[u] + sigmoid(a[u]) * std::tanh(a[2 * hidden + u]);
      h[u] = sigmoid(a[3 * hidden + u]) * std::tanh(c[u]);
    }
    out[t] = h;
  }
  return out;
}

// A path on seq [D][steps] of one utterance alone: unfold by I every J (zeros past the end), a
// BLSTM, the transposed convolution back to [D][steps].
Matrix reference_path(const Matrix& seq, const BlockSizes& s, const Parameters& p,
                      const std::string& prefix) {
  const int64_t steps = static_cast<int64_t>(seq[0].size());
  const int64_t padded = steps <= s.kernel
                             ? s.kernel
                             : (steps - s.kernel + s.stride - 1) / s.stride * s.stride + s.kernel;
  const int64_t positions = (padded - s.kernel) / s.stride + 1;
  Matrix x(positions, std::vector<double>(s.channels * s.kernel, 0.0));
  for (int64_t q = 0; q < positions; ++q)
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t i = 0; i < s.kernel; ++i)
        if (q * s.stride + i < steps) x[q][c * s.kernel + i] = seq[c][q * s.stride + i];
  auto forward = lstm_direction(x, p, prefix + "lstm.", "", false);
  auto backward = lstm_direction(x, p, prefix + "lstm.", "_reverse", true);
  auto weight = p[prefix + "projection.weight"];  // [2H, D, I]
  auto bias = p[prefix + "projection.bias"];
  Matrix out(s.channels, std::vector<double>(steps));
  for (int64_t c = 0; c < s.channels; ++c)
    for (int64_t t = 0; t < steps; ++t) {
      double sum = bias[c].item<double>();
      for (int64_t q = 0; q < positions; ++q)
        for (int64_t i = 0; i < s.kernel; ++i) {
          if (q * s.stride + i != t) continue;
          for (int64_t k = 0; k < s.hidden; ++k)
            sum += weight[k][c][i].item<double>() * forward[q][k] +
                   weight[s.hidden + k][c][i].item<double>() * backward[q][k];
        }
      out[c][t] = sum;
    }
  return out;
}

using Volume = std::vector<std::vector<std::vector<double>>>;  // [D][T][Q]

// Layer norm of every bin over its channels, then a path over bins (intra) or frames (inter),
// added to x.
Volume reference_path_step(const Volume& x, const BlockSizes& s, const Parameters& p,
                           const std::string& prefix, bool over_bins) {
  const int64_t frames = static_cast<int64_t>(x[0].size()), bins = s.bins;
  Volume y = x;
  for (int64_t t = 0; t < frames; ++t)
    for (int64_t q = 0; q < bins; ++q) {
      double mean = 0, variance = 0;
      for (int64_t c = 0; c < s.channels; ++c) mean += x[c][t][q] / s.channels;
      for (int64_t c = 0; c < s.channels; ++c)
        variance += (x[c][t][q] - mean) * (x[c][t][q] - mean) / s.channels;
      for (int64_t c = 0; c < s.channels; ++c)
        y[c][t][q] = (x[c][t][q] - mean) / std::sqrt(variance + s.epsilon) *
                         p[prefix + "norm_gain"][0][c][0][0].item<double>() +
                     p[prefix + "norm_bias"][0][c][0][0].item<double>();
    }
  Volume out = x;
  const int64_t outer = over_bins ? frames : bins, inner = over_bins ? bins : frames;
  for (int64_t o = 0; o < outer; ++o) {
    Matrix seq(s.channels, std::vector<double>(inner));
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t n = 0; n < inner; ++n) seq[c][n] = over_bins ? y[c][o][n] : y[c][n][o];
    auto result = reference_path(seq, s, p, prefix);
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t n = 0; n < inner; ++n) (over_bins ? out[c][o][n] : out[c][n][o]) += result[c][n];
  }
  return out;
}

// 1x1 convolution to heads * per_head channels, PReLU per head, norm over channels and bins of
// each frame of each head: x [D][T][Q] -> [heads][per_head][T][Q].
std::vector<Volume> reference_projection(const Volume& x, const Parameters& p,
                                         const std::string& name, double epsilon) {
  auto weight = p[name + "_weight"], bias = p[name + "_bias"], slope = p[name + "_slope"];
  auto gain = p[name + "_norm_gain"], norm_bias = p[name + "_norm_bias"];
  const int64_t heads = slope.size(0), per_head = gain.size(1);
  const int64_t channels = static_cast<int64_t>(x.size()), frames = x[0].size(),
                bins = x[0][0].size();
  std::vector<Volume> out(heads, Volume(per_head, Matrix(frames, std::vector<double>(bins))));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t e = 0; e < per_head; ++e)
      for (int64_t t = 0; t < frames; ++t)
        for (int64_t q = 0; q < bins; ++q) {
          double v = bias[h * per_head + e].item<double>();
          for (int64_t d = 0; d < channels; ++d)
            v += weight[h * per_head + e][d].item<double>() * x[d][t][q];
          out[h][e][t][q] = v >= 0 ? v : slope[h].item<double>() * v;
        }
    for (int64_t t = 0; t < frames; ++t) {
      double mean = 0, variance = 0;
      const double count = static_cast<double>(per_head * bins);
      for (int64_t e = 0; e < per_head; ++e)
        for (int64_t q = 0; q < bins; ++q) mean += out[h][e][t][q] / count;
      for (int64_t e = 0; e < per_head; ++e)
        for (int64_t q = 0; q < bins; ++q)
          variance += (out[h][e][t][q] - mean) * (out[h][e][t][q] - mean) / count;
      for (int64_t e = 0; e < per_head; ++e)
        for (int64_t q = 0; q < bins; ++q)
          out[h][e][t][q] = (out[h][e][t][q] - mean) / std::sqrt(variance + epsilon) *
                                gain[h][e][q].item<double>() +
                            norm_bias[h][e][q].item<double>();
    }
  }
  return out;
}

// Self-attention of every head over the frames of one utterance, its output projection, added.
Volume reference_attention(const Volume& x, const BlockSizes& s, const Parameters& p) {
  auto queries = reference_projection(x, p, "query", s.epsilon);
  auto keys = reference_projection(x, p, "key", s.epsilon);
  auto values = reference_projection(x, p, "value", s.epsilon);
  const int64_t frames = static_cast<int64_t>(x[0].size()), per_head = s.channels / s.heads;
  Volume merged(s.channels, Matrix(frames, std::vector<double>(s.bins, 0.0)));
  for (int64_t h = 0; h < s.heads; ++h)
    for (int64_t t = 0; t < frames; ++t) {
      std::vector<double> scores(frames);
      double largest = -1e300;
      for (int64_t u = 0; u < frames; ++u) {
        double dot = 0;
        for (int64_t e = 0; e < s.qk_channels; ++e)
          for (int64_t q = 0; q < s.bins; ++q) dot += queries[h][e][t][q] * keys[h][e][u][q];
        scores[u] = dot / std::sqrt(static_cast<double>(s.qk_channels * s.bins));
        largest = std::max(largest, scores[u]);
      }
      double total = 0;
      for (auto& score : scores) total += (score = std::exp(score - largest));
      for (int64_t u = 0; u < frames; ++u)
        for (int64_t c = 0; c < per_head; ++c)
          for (int64_t q = 0; q < s.bins; ++q)
            merged[h * per_head + c][t][q] += scores[u] / total * values[h][c][u][q];
    }
  auto projected = reference_projection(merged, p, "output", s.epsilon)[0];
  Volume out = x;
  for (int64_t c = 0; c < s.channels; ++c)
    for (int64_t t = 0; t < frames; ++t)
      for (int64_t q = 0; q < s.bins; ++q) out[c][t][q] += projected[c][t][q];
  return out;
}

TEST(TfGridNet, BlockComputesTheWrittenOutReferenceForEachUtteranceAlone) {
  BlockSizes wide_stride;
  wide_stride.channels = 4, wide_stride.kernel = 3, wide_stride.stride = 2;
  wide_stride.hidden = 3, wide_stride.heads = 2, wide_stride.qk_channels = 2;
  wide_stride.bins = 6;
  BlockSizes unit_stride = wide_stride;
  unit_stride.kernel = 2, unit_stride.stride = 1, unit_stride.heads = 1, unit_stride.bins = 5;
  for (const auto& sizes : {wide_stride, unit_stride}) {
    SCOPED_TRACE("kernel " + std::to_string(sizes.kernel) + " stride " +
                 std::to_string(sizes.stride));
    torch::manual_seed(11);
    tf_gridnet::GridNetBlock block(sizes);
    Parameters p;
    {
      torch::NoGradGuard no_grad;
      for (auto& item : block->named_parameters()) {
        item.value().uniform_(-0.6, 0.6);
        p.values[item.key()] = item.value().detach().to(torch::kDouble).clone();
      }
    }
    // Lengths around the unfolding: one shorter than the kernel.
    const std::vector<int64_t> lengths{7, 4, 2};
    const int64_t frames = 7;
    auto x = torch::randn({3, sizes.channels, frames, sizes.bins});
    for (std::size_t b = 0; b < lengths.size(); ++b)
      x[b].narrow(1, lengths[b], frames - lengths[b]).zero_();
    auto output = block->forward(x, torch::tensor(lengths), false).to(torch::kDouble);
    for (std::size_t b = 0; b < lengths.size(); ++b) {
      SCOPED_TRACE("utterance " + std::to_string(b));
      const int64_t length = lengths[b];
      Volume alone(sizes.channels, Matrix(length, std::vector<double>(sizes.bins)));
      for (int64_t c = 0; c < sizes.channels; ++c)
        for (int64_t t = 0; t < length; ++t)
          for (int64_t q = 0; q < sizes.bins; ++q) alone[c][t][q] = x[b][c][t][q].item<double>();
      auto expected = reference_attention(
          reference_path_step(reference_path_step(alone, sizes, p, "intra_", true), sizes, p,
                              "inter_", false),
          sizes, p);
      double largest_error = 0;
      for (int64_t c = 0; c < sizes.channels; ++c)
        for (int64_t q = 0; q < sizes.bins; ++q) {
          for (int64_t t = 0; t < length; ++t)
            largest_error = std::max(
                largest_error, std::abs(output[b][c][t][q].item<double>() - expected[c][t][q]));
          for (int64_t t = length; t < frames; ++t)
            EXPECT_EQ(output[b][c][t][q].item<double>(), 0.0) << "padded frame " << t;
        }
      EXPECT_LT(largest_error, 2e-5);
    }
  }
}

const char* kTinyTfGridNet =
    "architecture = tf_gridnet\nnum_speakers = 2\nwindow_length = 16\nwindow_shift = 4\n"
    "embedding_channels = 4\nunfold_kernel = 2\nhidden_units = 3\nattention_heads = 2\n"
    "attention_qk_dim = 9\nnum_blocks = 2\n";

TEST(TfGridNet, GivesOneWaveformPerSpeakerWhateverThePadding) {
  torch::manual_seed(12);
  auto model = testing::make_model_from(kTinyTfGridNet);
  const std::vector<int64_t> lengths{57, 40, 9, 3};
  auto batch = testing::padded_batch(lengths, 1);
  auto output = model->run({batch}, testing::lengths_of(lengths), false);
  ASSERT_EQ(output.sizes(), (std::vector<int64_t>{4, 57, 2}));
  EXPECT_TRUE(torch::isfinite(output).all().item<bool>());
  testing::expect_padding_invariant(*model, batch, lengths, /*zero_padding=*/true, {}, 1e-5);
  testing::expect_gradients_everywhere(*model, {batch}, testing::lengths_of(lengths));
}

// The mixture is scaled by its standard deviation going in and the outputs by it coming out, so
// a louder mixture gives proportionally louder sources.
TEST(TfGridNet, OutputsScaleWithTheMixture) {
  torch::manual_seed(13);
  auto model = testing::make_model_from(kTinyTfGridNet);
  auto signal = torch::randn({1, 100, 1});
  auto lengths = testing::lengths_of({100});
  auto quiet = model->run({signal}, lengths, false);
  auto loud = model->run({signal * 8.0}, lengths, false);
  EXPECT_TRUE(torch::allclose(loud, quiet * 8.0, 1e-4, 1e-5));
  EXPECT_GT(quiet.abs().max().item<double>(), 1e-3);
}

TEST(TfGridNet, OptionMistakesNameTheKey) {
  auto message = [](const std::string& body) {
    try {
      testing::make_model_from(body);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(std::string(kTinyTfGridNet) + "attention_heads = 3\n").find("attention_heads"),
            std::string::npos);
  EXPECT_NE(message(std::string(kTinyTfGridNet) + "window_shift = 9\n").find("window_shift"),
            std::string::npos);
  EXPECT_NE(message(std::string(kTinyTfGridNet) + "window = hamming\n").find("window"),
            std::string::npos);
  EXPECT_NE(message(std::string(kTinyTfGridNet) + "unfold_stride = 3\n").find("unfold_stride"),
            std::string::npos);
  auto model = testing::make_model_from(kTinyTfGridNet);
  EXPECT_THROW(model->run({torch::randn({2, 10, 129})}, testing::lengths_of({10, 10}), false),
               Error);
}

}  // namespace
}  // namespace nabu
