#include "nabu/neuralnetworks/models/model.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"

namespace nabu {

ModelRegistry& model_registry() {
  static ModelRegistry registry("architecture");
  return registry;
}

Model::Model(std::string name, std::string architecture, bool trainable, std::string where)
    : torch::nn::Module(name), name_(std::move(name)), architecture_(std::move(architecture)),
      where_(std::move(where)), trainable_(trainable) {}

std::string Model::describe() const {
  std::string text = "model '" + name_ + "' (" + architecture_;
  if (!where_.empty()) text += ", " + where_;
  return text + ")";
}

torch::Tensor Model::run(const std::vector<torch::Tensor>& inputs,
                         const torch::Tensor& seq_lengths, bool training) {
  if (inputs.empty()) throw Error(describe() + " called without inputs");
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined()) throw Error(describe() + ": input " + std::to_string(i) + " is empty");
  if (seq_lengths.defined() && seq_lengths.dim() != 1)
    throw Error(describe() + ": sequence lengths must be a vector [B]");
  if (!built_) {
    {
      torch::NoGradGuard no_grad;
      build(inputs);
    }
    built_ = true;
    for (auto& parameter : parameters()) parameter.set_requires_grad(trainable_);
  }
  return forward_impl(inputs, seq_lengths, training);
}

void Model::expect_inputs(const std::vector<torch::Tensor>& inputs, std::size_t min_count,
                          std::size_t max_count) const {
  if (inputs.size() < min_count || inputs.size() > max_count) {
    std::string expected = min_count == max_count
                               ? std::to_string(min_count)
                               : std::to_string(min_count) + " to " + std::to_string(max_count);
    throw Error(describe() + " expects " + expected + " input(s), got " +
                std::to_string(inputs.size()));
  }
}

void Model::expect_rank(const torch::Tensor& input, int64_t rank, const std::string& what) const {
  if (input.dim() != rank) {
    std::ostringstream shape;
    shape << input.sizes();
    throw Error(describe() + ": " + what + " must have " + std::to_string(rank) +
                " dimensions, got shape " + shape.str());
  }
}

torch::Tensor add_input_noise(const torch::Tensor& input, double stddev, bool training) {
  if (!training || stddev <= 0.0) return input;
  return input + torch::randn_like(input) * stddev;
}

torch::Tensor keep_dropout(const torch::Tensor& input, double keep_probability, bool training) {
  if (!training || keep_probability >= 1.0) return input;
  return torch::dropout(input, 1.0 - keep_probability, true);
}

torch::Tensor apply_activation(Activation activation, const torch::Tensor& input) {
  switch (activation) {
    case Activation::kNone: return input;
    case Activation::kTanh: return torch::tanh(input);
    case Activation::kSigmoid: return torch::sigmoid(input);
    case Activation::kRelu: return torch::relu(input);
    case Activation::kSoftmax: return torch::softmax(input, -1);
  }
  return input;
}

void declare_activation(OptionsReader& r, const std::string& key, Activation& value,
                        const std::vector<std::string>& allowed, const std::string& help) {
  static const std::vector<std::pair<std::string, Activation>> names = {
      {"None", Activation::kNone},
      {"tanh", Activation::kTanh},
      {"sigmoid", Activation::kSigmoid},
      {"relu", Activation::kRelu},
      {"softmax", Activation::kSoftmax}};
  std::vector<std::pair<std::string, Activation>> accepted;
  for (const auto& name : allowed)
    for (const auto& entry : names)
      if (entry.first == name) accepted.push_back(entry);
  r.choice(key, value, accepted, help);
}

void declare_common(OptionsReader& r, std::string& architecture, bool& trainable) {
  r("architecture", architecture, "the architecture (registry name)");
  r("trainable", trainable, "False keeps the model's parameters fixed (no gradients)");
}

void glorot_uniform_(torch::Tensor& weight, int64_t fan_in, int64_t fan_out) {
  double bound = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  weight.uniform_(-bound, bound);
}

std::vector<int64_t> sizes_per_layer(int64_t base, double factor, int64_t count) {
  std::vector<int64_t> sizes;
  for (int64_t layer = 0; layer < count; ++layer)
    sizes.push_back(static_cast<int64_t>(
        std::ceil(static_cast<double>(base) * std::pow(factor, static_cast<double>(layer)))));
  return sizes;
}

}  // namespace nabu
