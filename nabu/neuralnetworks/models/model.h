// A model: a torch module built from one model.cfg section (docs/models.md, §2.c). Models are
// called by the nodes of a task graph with a list of input tensors and the sequence lengths of the
// first input. Parameters are created on the first call from the input shapes (as the original's
// variables are), so a model needs no input dimensions in its config.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/options.h"
#include "nabu/core/registry.h"

namespace nabu {

// A causal model run on a signal that arrives in pieces (`nabu separate --stream`,
// inference/separation_stream.h): it keeps what the model needs of the past between pushes,
// so the concatenated outputs equal the model's forward pass over the whole signal. It refers to
// its model, which must outlive it.
class ModelStream {
 public:
  virtual ~ModelStream() = default;
  // samples [n] (float, the model's input scale) -> [S, m]: the separated samples that no later
  // input changes (m may differ from n by up to lookahead()).
  virtual torch::Tensor push(const torch::Tensor& samples) = 0;
  // The end of the signal: the rest of the output, padded as the whole-signal pass pads it.
  virtual torch::Tensor finish() = 0;
  // Samples an output lags the last input sample by, beyond the pushed piece itself.
  virtual int64_t lookahead() const = 0;
};

class Model : public torch::nn::Module {
 public:
  // `where` locates the model's section ("model.cfg:12: [main]") for error messages.
  Model(std::string name, std::string architecture, bool trainable = true, std::string where = "");

  // inputs: [B, T, ...] each, zero-padded; seq_lengths: int64 [B] (of the first input).
  // training=true enables input noise and dropout. Builds the parameters on the first call.
  torch::Tensor run(const std::vector<torch::Tensor>& inputs, const torch::Tensor& seq_lengths,
                    bool training);

  bool built() const { return built_; }
  const std::string& model_name() const { return name_; }
  const std::string& architecture() const { return architecture_; }
  bool trainable() const { return trainable_; }
  // "model 'main' (dblstm, model.cfg:5: [main])": the prefix of this model's runtime errors.
  std::string describe() const;
  // A stream over this built model (batch of one, on its device), or nullptr when it cannot be
  // streamed; why_not_streamed() then says why.
  virtual std::unique_ptr<ModelStream> stream() { return nullptr; }
  virtual std::string why_not_streamed() const {
    return "architecture " + architecture_ + " cannot be streamed (conv_tasnet with causal = True can)";
  }

 protected:
  // Creates and registers the parameters/submodules for inputs shaped like `inputs`. Runs under
  // a NoGradGuard so that initialisers may write into the new parameters.
  virtual void build(const std::vector<torch::Tensor>& inputs) = 0;
  virtual torch::Tensor forward_impl(const std::vector<torch::Tensor>& inputs,
                                     const torch::Tensor& seq_lengths, bool training) = 0;
  // Throws Error unless there are between min_count and max_count inputs.
  void expect_inputs(const std::vector<torch::Tensor>& inputs, std::size_t min_count,
                     std::size_t max_count) const;
  // Throws Error unless `input` has `rank` dimensions (what: e.g. "input 1").
  void expect_rank(const torch::Tensor& input, int64_t rank, const std::string& what) const;

 private:
  std::string name_, architecture_, where_;
  bool trainable_ = true;
  bool built_ = false;
};

using ModelPtr = std::shared_ptr<Model>;
// Factory arguments: the model name (the section name) and its model.cfg section.
using ModelRegistry = Registry<ModelPtr, const std::string&, const ConfigSection&>;
ModelRegistry& model_registry();

// Builds model `M` from its options struct: every architecture registers through this, so
// unknown keys and bad values are rejected the same way at construction and in `nabu check`.
template <class M, class Options>
ModelPtr make_model(const std::string& name, const ConfigSection& section) {
  auto options = read_options<Options>(section, "model '" + name + "'");
  return std::make_shared<M>(name, section.where(), options);
}

// Gaussian noise of standard deviation `stddev` added in training only (the common
// `input_noise` key).
torch::Tensor add_input_noise(const torch::Tensor& input, double stddev, bool training);
// Dropout with a KEEP probability as in the original (`dropout = 1.0` means none), training only.
torch::Tensor keep_dropout(const torch::Tensor& input, double keep_probability, bool training);

// Activation functions by the original's names.
enum class Activation { kNone, kTanh, kSigmoid, kRelu, kSoftmax };
torch::Tensor apply_activation(Activation activation, const torch::Tensor& input);

// Reads an activation key: `allowed` lists the names this model accepts (e.g. {"tanh",
// "sigmoid", "relu"}); a value outside it is a ConfigError naming file:line and key.
void declare_activation(OptionsReader& r, const std::string& key, Activation& value,
                        const std::vector<std::string>& allowed, const std::string& help);

// The keys every model section may carry: `architecture` (read by the bank) and `trainable`.
void declare_common(OptionsReader& r, std::string& architecture, bool& trainable);

// Glorot/Xavier uniform init as TensorFlow's default for weights (bound sqrt(6/(fan_in+fan_out))).
void glorot_uniform_(torch::Tensor& weight, int64_t fan_in, int64_t fan_out);

// ceil(base * factor^layer) for layer = 0..count-1: the original's `fac_per_layer` sizes.
std::vector<int64_t> sizes_per_layer(int64_t base, double factor, int64_t count);

}  // namespace nabu
