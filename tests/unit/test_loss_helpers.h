// Shared pieces of the loss computer tests: building losses from option text, random batches
// with garbage in the padded frames, and a finite-difference gradient check in double precision.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"

namespace nabu::testing {

// A loss of class `type` configured by the INI body `options` (e.g. "activation = sigmoid\n").
inline LossPtr make_test_loss(const std::string& type, const std::string& options = "") {
  auto config = ConfigFile::parse("[options]\n" + options, "loss.cfg");
  return loss_registry().create(type, config.section("options"));
}

inline torch::Tensor lengths_tensor(const std::vector<int64_t>& lengths) {
  return torch::tensor(lengths, torch::kLong);
}

inline torch::TensorOptions f64() { return torch::TensorOptions().dtype(torch::kDouble); }

// Random one-hot speaker labels per bin: bool [B, T, F*S] with column f*S+s. Silent speakers in
// `silent` (per utterance) never dominate a bin.
inline torch::Tensor random_binary_targets(int64_t batch, int64_t frames, int64_t features,
                                           int64_t speakers,
                                           const std::vector<std::vector<int64_t>>& silent = {}) {
  auto out = torch::zeros({batch, frames, features * speakers}, torch::kBool);
  auto a = out.accessor<bool, 3>();
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int64_t> active;
    for (int64_t s = 0; s < speakers; ++s) {
      bool is_silent = b < static_cast<int64_t>(silent.size()) &&
                       std::count(silent[b].begin(), silent[b].end(), s) > 0;
      if (!is_silent) active.push_back(s);
    }
    for (int64_t t = 0; t < frames; ++t)
      for (int64_t f = 0; f < features; ++f) {
        if (active.empty()) continue;
        int64_t pick = torch::randint(static_cast<int64_t>(active.size()), {1}).item<int64_t>();
        a[b][t][f * speakers + active[pick]] = true;
      }
  }
  return out;
}

inline torch::Tensor random_usedbins(int64_t batch, int64_t frames, int64_t features,
                                     double probability = 0.7) {
  return torch::rand({batch, frames, features}, f64()) < probability;
}

// Central differences of `loss_of` around `x` against autograd, on up to `samples` coordinates
// (all of them when there are fewer). Also returns the autograd gradient for further checks.
inline torch::Tensor expect_gradient_matches(
    const std::function<torch::Tensor(const torch::Tensor&)>& loss_of, const torch::Tensor& x,
    int64_t samples = 40, double step = 1e-6, double tolerance = 1e-5) {
  auto input = x.detach().clone().requires_grad_(true);
  auto loss = loss_of(input);
  auto gradient = torch::autograd::grad({loss}, {input})[0].detach();
  EXPECT_TRUE(torch::isfinite(gradient).all().item<bool>());
  const int64_t count = input.numel();
  std::vector<int64_t> coordinates;
  if (count <= samples) {
    for (int64_t i = 0; i < count; ++i) coordinates.push_back(i);
  } else {
    auto chosen = torch::randperm(count, torch::kLong).narrow(0, 0, samples);
    for (int64_t i = 0; i < samples; ++i) coordinates.push_back(chosen[i].item<int64_t>());
  }
  auto flat_gradient = gradient.reshape(-1);
  for (int64_t i : coordinates) {
    auto plus = x.detach().clone().reshape(-1);
    auto minus = plus.clone();
    plus[i] += step;
    minus[i] -= step;
    double numeric = (loss_of(plus.view(x.sizes())).item<double>() -
                      loss_of(minus.view(x.sizes())).item<double>()) /
                     (2 * step);
    double analytic = flat_gradient[i].item<double>();
    EXPECT_NEAR(analytic, numeric, tolerance * std::max(1.0, std::abs(numeric)))
        << "coordinate " << i;
  }
  return gradient;
}

// Every element of `gradient` [B, T, ...] on padded frames (t >= length) is exactly zero.
inline void expect_zero_on_padding(const torch::Tensor& gradient,
                                   const std::vector<int64_t>& lengths) {
  for (int64_t b = 0; b < static_cast<int64_t>(lengths.size()); ++b) {
    if (lengths[b] >= gradient.size(1)) continue;
    auto padded = gradient[b].narrow(0, lengths[b], gradient.size(1) - lengths[b]);
    EXPECT_EQ(padded.abs().max().item<double>(), 0.0) << "utterance " << b;
  }
}

// Permutations of 0..n-1, the obvious way.
inline std::vector<std::vector<int64_t>> permutations_of(int64_t n) {
  std::vector<int64_t> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  std::vector<std::vector<int64_t>> out;
  do out.push_back(p);
  while (std::next_permutation(p.begin(), p.end()));
  return out;
}

}  // namespace nabu::testing
