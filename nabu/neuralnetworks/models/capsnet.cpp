// capsnet: a frame-wise capsule network (the original's models/capsnet.py, SS/CapsNet recipes):
// primary capsules from a dense map of each frame, then capsule layers with dynamic routing.
// Every frame is computed independently, so padding never reaches real frames.
#include <cmath>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/models/capsules.h"
#include "nabu/neuralnetworks/models/model.h"

namespace nabu {

namespace capsules {

void CapsuleOptions::declare(OptionsReader& r) {
  declare_common(r, architecture, trainable);
  r("num_capsules", num_capsules, "capsules per layer (and per direction for dbr_capsnet)");
  r("capsule_dim", capsule_dim, "dimension of a capsule");
  r("routing_iters", routing_iters, "dynamic routing iterations per capsule layer (and frame)");
  r("num_layers", num_layers,
    "layers including the primary capsules (num_layers - 1 routed capsule layers)");
  r("logits_prior", logits_prior,
    "True learns the initial routing logits (otherwise they stay zero)");
  r("input_noise", input_noise, "stddev of Gaussian noise added to the input in training");
  r("dropout", dropout, "dropout KEEP probability after every routed layer in training");
  r.require(num_capsules > 0, "num_capsules", "required: must be > 0");
  r.require(capsule_dim > 0, "capsule_dim", "required: must be > 0");
  r.require(routing_iters >= 0, "routing_iters", "must be >= 0");
  r.require(num_layers >= 1, "num_layers", "must be >= 1 (the primary capsules)");
  r.require(input_noise >= 0.0, "input_noise", "must be >= 0");
  r.require(dropout > 0.0 && dropout <= 1.0, "dropout", "is a keep probability in (0, 1]");
}

torch::Tensor squash(const torch::Tensor& s) {
  auto squared_norm = s.square().sum(-1, /*keepdim=*/true);
  return s * (squared_norm / (1.0 + squared_norm) / torch::sqrt(squared_norm + 1e-7));
}

void vote_transform_uniform_(torch::Tensor& kernel) {
  double fan_average = (kernel.size(1) + kernel.size(3)) / 2.0;
  double limit = std::sqrt(3.0 / std::max(1.0, fan_average));
  kernel.uniform_(-limit, limit);
}

torch::Tensor predict(const torch::Tensor& inputs, const torch::Tensor& kernel) {
  // [..., i, x] . [i, x, n, d] -> [..., i, n, d]
  return torch::einsum("...ix,ixnd->...ind", {inputs, kernel});
}

torch::Tensor route(const torch::Tensor& predictions, const torch::Tensor& logits,
                    int iterations) {
  auto weighted_sum = [&](const torch::Tensor& current) {
    return (torch::softmax(current, -1).unsqueeze(-1) * predictions).sum(-3);  // [..., n, d]
  };
  torch::Tensor current = logits;
  for (int iteration = 0; iteration < iterations; ++iteration) {
    auto capsules = squash(weighted_sum(current));
    current = current + (predictions * capsules.unsqueeze(-3)).sum(-1);  // [..., i, n]
  }
  return squash(weighted_sum(current));
}

}  // namespace capsules

namespace {

using CapsNetOptions = capsules::CapsuleOptions;

class CapsNetModel : public Model {
 public:
  CapsNetModel(const std::string& name, const std::string& where, CapsNetOptions options)
      : Model(name, "capsnet", options.trainable, where), options_(std::move(options)) {}

 protected:
  void build(const std::vector<torch::Tensor>& inputs) override {
    expect_inputs(inputs, 1, 1);
    const int64_t in = inputs[0].size(-1);
    const int64_t capsules = options_.num_capsules, dim = options_.capsule_dim;
    auto float_options = torch::TensorOptions().device(inputs[0].device());
    auto primary = torch::empty({in, capsules * dim}, float_options);
    glorot_uniform_(primary, in, capsules * dim);
    primary_ = register_parameter("primary_capsule_kernel", primary);
    for (int layer = 1; layer < options_.num_layers; ++layer) {
      auto kernel = torch::empty({capsules, dim, capsules, dim}, float_options);
      capsules::vote_transform_uniform_(kernel);
      std::string prefix = "layer" + std::to_string(layer) + "_";
      kernels_.push_back(register_parameter(prefix + "kernel", kernel));
      // The initial logits are zeros; a variable only with logits_prior, as in the original.
      auto logits = torch::zeros({capsules, capsules}, float_options);
      logits_.push_back(options_.logits_prior ? register_parameter(prefix + "init_logits", logits)
                                              : logits);
    }
  }

  torch::Tensor forward_impl(const std::vector<torch::Tensor>& inputs, const torch::Tensor&,
                             bool training) override {
    expect_inputs(inputs, 1, 1);
    expect_rank(inputs[0], 3, "the input ([B, T, dim])");
    const auto& x = add_input_noise(inputs[0], options_.input_noise, training);
    const int64_t batch = x.size(0), frames = x.size(1);
    const int64_t capsules = options_.num_capsules, dim = options_.capsule_dim;
    auto output = capsules::squash(torch::matmul(x, primary_).reshape({batch, frames, capsules, dim}));
    for (std::size_t layer = 0; layer < kernels_.size(); ++layer) {
      output = capsules::route(capsules::predict(output, kernels_[layer]), logits_[layer],
                               options_.routing_iters);
      output = keep_dropout(output, options_.dropout, training);
    }
    return output.reshape({batch, frames, capsules * dim});
  }

 private:
  CapsNetOptions options_;
  torch::Tensor primary_;
  std::vector<torch::Tensor> kernels_, logits_;
};

}  // namespace

NABU_REGISTER_WITH_OPTIONS(model_registry, "capsnet", (make_model<CapsNetModel, CapsNetOptions>),
                           CapsNetOptions,
                           "frame-wise capsule network: dense primary capsules, then capsule "
                           "layers with dynamic routing, output [B, T, num_capsules*capsule_dim]")

}  // namespace nabu
