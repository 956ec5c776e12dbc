// A model: a torch module built from one model.cfg section (SPEC §1.1, §2.c). Models are called
// by the nodes of a task graph with a list of input tensors and the sequence lengths of the first
// input. Parameters are created on the first call from the input shapes (as the original's
// variables are), so a model needs no input dimensions in its config.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/registry.h"

namespace nabu {

class Model : public torch::nn::Module {
 public:
  Model(std::string name, std::string architecture, bool trainable = true);

  // inputs: [B, T, ...] each, zero-padded; seq_lengths: int64 [B] (of the first input).
  // training=true enables input noise and dropout. Builds the parameters on the first call.
  torch::Tensor run(const std::vector<torch::Tensor>& inputs, const torch::Tensor& seq_lengths,
                    bool training);

  bool built() const { return built_; }
  const std::string& model_name() const { return name_; }
  const std::string& architecture() const { return architecture_; }
  bool trainable() const { return trainable_; }

 protected:
  // Creates and registers the parameters/submodules for inputs shaped like `inputs`.
  virtual void build(const std::vector<torch::Tensor>& inputs) = 0;
  virtual torch::Tensor forward_impl(const std::vector<torch::Tensor>& inputs,
                                     const torch::Tensor& seq_lengths, bool training) = 0;

 private:
  std::string name_, architecture_;
  bool trainable_ = true;
  bool built_ = false;
};

using ModelPtr = std::shared_ptr<Model>;
// Factory arguments: the model name (the section name) and its model.cfg section.
using ModelRegistry = Registry<ModelPtr, const std::string&, const ConfigSection&>;
ModelRegistry& model_registry();

// Gaussian noise of standard deviation `stddev` added in training only (the common
// `input_noise` key).
torch::Tensor add_input_noise(const torch::Tensor& input, double stddev, bool training);
// Dropout with a KEEP probability as in the original (`dropout = 1.0` means none), training only.
torch::Tensor keep_dropout(const torch::Tensor& input, double keep_probability, bool training);

}  // namespace nabu
