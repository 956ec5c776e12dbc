// conv_tasnet_kernels.h: Conv-TasNet's block operations on the CPU, values and gradients,
// against the same computations written out with LibTorch's operations in double.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "nabu/neuralnetworks/kernels/conv_tasnet_kernels.h"
#include "test_model_helpers.h"

namespace nabu::testing {
namespace conv_tasnet_kernels_test {

namespace F = torch::nn::functional;

// Float leaves and their double copies, which the reference computes with.
struct Leaves {
  std::vector<torch::Tensor> floats, doubles;
  explicit Leaves(const std::vector<torch::Tensor>& values) {
    for (const auto& v : values) {
      floats.push_back(v.to(torch::kFloat).detach().requires_grad_(true));
      doubles.push_back(v.to(torch::kDouble).detach().requires_grad_(true));
    }
  }
};

// Backpropagates the same random output gradient through both and compares every leaf's.
void expect_same_gradients(const torch::Tensor& got, const torch::Tensor& expected, Leaves& leaves,
                           double tolerance) {
  const auto upstream = torch::randn(expected.sizes(), torch::kDouble);
  got.backward(upstream.to(torch::kFloat));
  expected.backward(upstream);
  for (std::size_t i = 0; i < leaves.floats.size(); ++i)
    EXPECT_LT(max_relative_error(leaves.floats[i].grad(), leaves.doubles[i].grad()), tolerance)
        << "leaf " << i;
}

TEST(ConvTasNetKernels, DepthwiseConvolutionIsThePaddedGroupedConvolution) {
  torch::manual_seed(5);
  struct Case {
    int64_t frames, taps, dilation, left, right;
  };
  // Centred (Conv-TasNet's blocks), causal, a dilation wider than the input, uneven padding.
  for (const auto& c : {Case{37, 3, 4, 4, 4}, Case{37, 3, 8, 16, 0}, Case{5, 3, 8, 8, 8},
                        Case{20, 4, 1, 2, 1}, Case{33, 1, 1, 0, 0}}) {
    const int64_t channels = 6;
    Leaves leaves({torch::randn({3, channels, c.frames}), torch::randn({channels, 1, c.taps}),
                   torch::randn({channels})});
    const auto got = conv_kernels::depthwise_conv1d(leaves.floats[0], leaves.floats[1],
                                                    leaves.floats[2], c.dilation, c.left, c.right);
    const auto& d = leaves.doubles;
    const auto expected = F::conv1d(F::pad(d[0], F::PadFuncOptions({c.left, c.right})), d[1],
                                    F::Conv1dFuncOptions().bias(d[2]).dilation(c.dilation)
                                        .groups(channels));
    ASSERT_EQ(got.sizes(), expected.sizes());
    EXPECT_LT(max_relative_error(got, expected), 1e-6)
        << c.frames << " frames, dilation " << c.dilation;
    expect_same_gradients(got, expected, leaves, 1e-5);
  }
}

TEST(ConvTasNetKernels, DepthwiseConvolutionRejectsTooFewFrames) {
  const auto x = torch::randn({1, 2, 3});
  EXPECT_THROW(conv_kernels::depthwise_conv1d(x, torch::randn({2, 1, 3}), torch::zeros({2}), 4, 0,
                                              0),
               c10::Error);
}

// gLN(PReLU(x)) written out: the statistics over the masked frames of all channels.
torch::Tensor reference_prelu_global_norm(const std::vector<torch::Tensor>& d,
                                          const torch::Tensor& mask) {
  const auto& x = d[0];
  const auto p = torch::where(x > 0, x, d[1] * x);
  const auto weights = mask.defined() ? mask.to(torch::kDouble)
                                      : torch::ones({x.size(0), 1, x.size(2)}, torch::kDouble);
  const auto count = (weights.sum({1, 2}, true) * x.size(1)).clamp_min(1.0);
  const auto mean = (p * weights).sum({1, 2}, true) / count;
  const auto variance = ((p - mean).pow(2) * weights).sum({1, 2}, true) / count;
  return ((p - mean) / torch::sqrt(variance + 1e-8) * d[2] + d[3]) * weights;
}

TEST(ConvTasNetKernels, PreluGlobalNormIsTheMaskedNormOfThePrelu) {
  torch::manual_seed(6);
  const int64_t batch = 3, channels = 5, frames = 41;
  // Frames 41, 30 and 1 real: the padded ones neither count nor get a value or a gradient.
  auto mask = torch::zeros({batch, 1, frames});
  mask[0].fill_(1);
  mask[1].narrow(1, 0, 30).fill_(1);
  mask[2].narrow(1, 0, 1).fill_(1);
  for (const auto& m : {torch::Tensor(), mask}) {
    // An offset, so that the mean is not near zero and the centring is exercised.
    Leaves leaves({torch::randn({batch, channels, frames}) + 0.7, torch::full({1}, 0.25),
                   torch::randn({1, channels, 1}), torch::randn({1, channels, 1})});
    const auto& f = leaves.floats;
    const auto got = conv_kernels::prelu_global_norm(f[0], f[1], f[2], f[3], m, 1e-8);
    const auto expected = reference_prelu_global_norm(leaves.doubles, m);
    EXPECT_LT(max_relative_error(got, expected), 1e-5) << (m.defined() ? "masked" : "unmasked");
    if (m.defined()) {
      EXPECT_EQ(got.index({1, torch::indexing::Slice(), torch::indexing::Slice(30)}).abs().max()
                    .item<float>(),
                0.0F);
    }
    expect_same_gradients(got, expected, leaves, 1e-4);
    if (m.defined()) {
      EXPECT_EQ(f[0].grad().index({1, torch::indexing::Slice(), torch::indexing::Slice(30)})
                    .abs().max().item<float>(),
                0.0F);
    }
  }
}

TEST(ConvTasNetKernels, PreluGlobalNormOfASequenceWithNoRealFrameIsZero) {
  const auto mask = torch::zeros({1, 1, 4});
  const auto y = conv_kernels::prelu_global_norm(torch::randn({1, 2, 4}), torch::full({1}, 0.25),
                                                 torch::ones({1, 2, 1}), torch::ones({1, 2, 1}),
                                                 mask, 1e-8);
  EXPECT_EQ(y.abs().max().item<float>(), 0.0F);
}

}  // namespace conv_tasnet_kernels_test
}  // namespace nabu::testing
