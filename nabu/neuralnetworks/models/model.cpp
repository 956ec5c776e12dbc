#include "nabu/neuralnetworks/models/model.h"

#include "nabu/core/error.h"

namespace nabu {

ModelRegistry& model_registry() {
  static ModelRegistry registry("architecture");
  return registry;
}

Model::Model(std::string name, std::string architecture, bool trainable)
    : torch::nn::Module(name), name_(std::move(name)), architecture_(std::move(architecture)),
      trainable_(trainable) {}

torch::Tensor Model::run(const std::vector<torch::Tensor>& inputs,
                         const torch::Tensor& seq_lengths, bool training) {
  if (inputs.empty()) throw Error("model '" + name_ + "' called without inputs");
  if (!built_) {
    build(inputs);
    built_ = true;
    if (!trainable_)
      for (auto& parameter : parameters()) parameter.set_requires_grad(false);
  }
  return forward_impl(inputs, seq_lengths, training);
}

torch::Tensor add_input_noise(const torch::Tensor& input, double stddev, bool training) {
  if (!training || stddev <= 0.0) return input;
  return input + torch::randn_like(input) * stddev;
}

torch::Tensor keep_dropout(const torch::Tensor& input, double keep_probability, bool training) {
  if (!training || keep_probability >= 1.0) return input;
  return torch::dropout(input, 1.0 - keep_probability, true);
}

}  // namespace nabu
