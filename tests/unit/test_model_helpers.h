// Shared by the model tests: models from INI text, padded batches, comparisons.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/models/model.h"

namespace nabu::testing {

// A model named `name` built from the body of its model.cfg section (architecture included).
inline ModelPtr make_model_from(const std::string& body, const std::string& name = "m") {
  auto config = ConfigFile::parse("[" + name + "]\n" + body, "model.cfg");
  const auto& section = config.section(name);
  return model_registry().create(trim(section.get_string("architecture")), name, section);
}

// The largest difference from `expected`, relative to the largest value of `expected`, in double.
inline double max_relative_error(const torch::Tensor& got, const torch::Tensor& expected) {
  const auto reference = expected.to(torch::kDouble);
  return ((got.to(torch::kDouble) - reference).abs().max() /
          reference.abs().max().clamp_min(1e-30))
      .item<double>();
}

inline torch::Tensor lengths_of(const std::vector<int64_t>& lengths) {
  return torch::tensor(lengths, torch::kLong);
}

// A [B, T, D] batch whose padded frames hold large random values, so that any leak shows.
inline torch::Tensor padded_batch(const std::vector<int64_t>& lengths, int64_t dim,
                                  int64_t frames = -1) {
  int64_t longest = 0;
  for (auto length : lengths) longest = std::max(longest, length);
  if (frames < 0) frames = longest;
  auto x = torch::randn({static_cast<int64_t>(lengths.size()), frames, dim});
  for (std::size_t b = 0; b < lengths.size(); ++b)
    if (lengths[b] < frames)
      x[b].narrow(0, lengths[b], frames - lengths[b]).fill_(50.0);
  return x;
}

inline std::map<std::string, torch::Tensor> parameters_by_name(const Model& model) {
  std::map<std::string, torch::Tensor> result;
  for (const auto& item : model.named_parameters()) result[item.key()] = item.value();
  return result;
}

// The model on a padded batch equals the model on each utterance alone (real frames), and the
// padded frames of the batch output are zero when `zero_padding` is set. `extra` are further
// inputs shared per utterance ([B, ...], sliced per utterance).
inline void expect_padding_invariant(Model& model, const torch::Tensor& batch,
                                     const std::vector<int64_t>& lengths, bool zero_padding = true,
                                     const std::vector<torch::Tensor>& extra = {},
                                     double tolerance = 1e-5) {
  std::vector<torch::Tensor> inputs{batch};
  inputs.insert(inputs.end(), extra.begin(), extra.end());
  auto output = model.run(inputs, lengths_of(lengths), false);
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    const int64_t length = lengths[b];
    std::vector<torch::Tensor> alone{batch[b].narrow(0, 0, length).unsqueeze(0)};
    for (const auto& tensor : extra) alone.push_back(tensor[b].unsqueeze(0));
    auto single = model.run(alone, lengths_of({length}), false);
    auto real = output[b].narrow(0, 0, length);
    EXPECT_TRUE(torch::allclose(real, single[0], tolerance, tolerance))
        << "utterance " << b << " differs from its run alone by "
        << (real - single[0]).abs().max().item<double>();
    if (zero_padding && length < output.size(1)) {
      EXPECT_EQ(output[b].narrow(0, length, output.size(1) - length).abs().max().item<double>(),
                0.0)
          << "padded frames of utterance " << b << " are not zero";
    }
  }
}

// Every parameter gets a non-zero gradient from the sum of the outputs.
inline void expect_gradients_everywhere(Model& model, const std::vector<torch::Tensor>& inputs,
                                        const torch::Tensor& lengths) {
  model.zero_grad();
  auto output = model.run(inputs, lengths, true);
  (output * torch::randn_like(output)).sum().backward();
  ASSERT_FALSE(model.parameters().empty());
  for (const auto& item : model.named_parameters()) {
    ASSERT_TRUE(item.value().grad().defined()) << item.key() << " got no gradient";
    EXPECT_GT(item.value().grad().abs().sum().item<double>(), 0.0)
        << item.key() << " got a zero gradient";
  }
}

inline double max_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

}  // namespace nabu::testing
