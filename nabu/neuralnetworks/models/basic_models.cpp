// Frame-wise and structural models: linear, feedforward, concat, constant_generator
// (docs/models.md, §2.c; the original's models/linear.py, feedforward.py, concat.py,
// constant_generator.py). These compute every frame independently, so real frames never depend on
// padding; they do not zero padded frames (the losses mask them, as in the original).
#include <algorithm>
#include <numeric>
#include <sstream>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/models/basic_models.h"

namespace nabu {
namespace {

// ---------------------------------------------------------------------------------- linear


// Affine map of the last axis: x [.., in] -> [.., out]. Weight laid out [in, out] as TF's.
struct Affine {
  torch::Tensor weight, bias;
  torch::Tensor operator()(const torch::Tensor& x) const {
    auto y = torch::matmul(x, weight);
    return bias.defined() ? y + bias : y;
  }
};

Affine make_affine(torch::nn::Module& module, const std::string& prefix, int64_t in, int64_t out,
                   bool with_bias, const torch::Device& device) {
  Affine affine;
  auto weight = torch::empty({in, out}, torch::TensorOptions().device(device));
  glorot_uniform_(weight, in, out);
  affine.weight = module.register_parameter(prefix + "weights", weight);
  if (with_bias)
    affine.bias = module.register_parameter(
        prefix + "biases", torch::zeros({out}, torch::TensorOptions().device(device)));
  return affine;
}

class LinearModel : public Model {
 public:
  LinearModel(const std::string& name, const std::string& where, LinearOptions options)
      : Model(name, "linear", options.trainable, where), options_(std::move(options)) {}

 protected:
  void build(const std::vector<torch::Tensor>& inputs) override {
    expect_inputs(inputs, 1, 1);
    int64_t out = 1;
    for (int dim : options_.output_dims) out *= dim;
    affine_ = make_affine(*this, "", inputs[0].size(-1), out, !options_.no_bias,
                          inputs[0].device());
  }

  torch::Tensor forward_impl(const std::vector<torch::Tensor>& inputs, const torch::Tensor&,
                             bool training) override {
    expect_inputs(inputs, 1, 1);
    auto output = affine_(add_input_noise(inputs[0], options_.input_noise, training));
    if (options_.output_dims.size() > 1) {
      std::vector<int64_t> shape(output.sizes().begin(), output.sizes().end() - 1);
      shape.insert(shape.end(), options_.output_dims.begin(), options_.output_dims.end());
      output = output.reshape(shape);
    }
    output = apply_activation(options_.activation, output);
    output = keep_dropout(output, options_.dropout, training);
    if (options_.last_only) output = output.select(1, -1).unsqueeze(1);
    return output;
  }

 public:
  const LinearOptions& options() const { return options_; }

 private:
  LinearOptions options_;
  Affine affine_;
};

}  // namespace

const LinearOptions* linear_options(const Model& model) {
  const auto* linear = dynamic_cast<const LinearModel*>(&model);
  return linear ? &linear->options() : nullptr;
}

namespace {

NABU_REGISTER_WITH_OPTIONS(model_registry, "linear", (make_model<LinearModel, LinearOptions>),
                           LinearOptions, "affine map of the last axis, optional reshape")

// ----------------------------------------------------------------------------- feedforward

struct FeedforwardOptions {
  std::string architecture;
  bool trainable = true;
  int num_layers = 1;
  int num_units = 0;
  double fac_per_layer = 1.0;
  Activation activation = Activation::kTanh;
  double input_noise = 0.0;
  double dropout = 1.0;

  void declare(OptionsReader& r) {
    declare_common(r, architecture, trainable);
    r("num_layers", num_layers, "number of fully connected layers");
    r("num_units", num_units, "units of the first layer");
    r("fac_per_layer", fac_per_layer, "layer l has ceil(num_units * fac_per_layer^l) units");
    declare_activation(r, "activation_func", activation, {"tanh", "sigmoid", "relu"},
                       "activation of every layer (the last one too)");
    r("input_noise", input_noise, "stddev of Gaussian noise added to the input in training");
    r("dropout", dropout, "dropout KEEP probability after the last layer in training");
    r.accepted("layer_norm", "the original's feedforward ignores it");
    r.accepted("recurrent_dropout", "not recurrent");
    r.require(num_layers >= 0, "num_layers", "must be >= 0");
    r.require(num_units > 0 || num_layers == 0, "num_units", "required: must be > 0");
    r.require(dropout > 0.0 && dropout <= 1.0, "dropout",
                   "is a keep probability in (0, 1]");
  }
};

class FeedforwardModel : public Model {
 public:
  FeedforwardModel(const std::string& name, const std::string& where, FeedforwardOptions options)
      : Model(name, "feedforward", options.trainable, where), options_(std::move(options)) {}

 protected:
  void build(const std::vector<torch::Tensor>& inputs) override {
    expect_inputs(inputs, 1, 1);
    int64_t in = inputs[0].size(-1);
    for (int64_t units :
         sizes_per_layer(options_.num_units, options_.fac_per_layer, options_.num_layers)) {
      layers_.push_back(make_affine(*this, "layer" + std::to_string(layers_.size()) + "_", in,
                                    units, true, inputs[0].device()));
      in = units;
    }
  }

  torch::Tensor forward_impl(const std::vector<torch::Tensor>& inputs, const torch::Tensor&,
                             bool training) override {
    expect_inputs(inputs, 1, 1);
    auto x = add_input_noise(inputs[0], options_.input_noise, training);
    for (const auto& layer : layers_) x = apply_activation(options_.activation, layer(x));
    return keep_dropout(x, options_.dropout, training);
  }

 private:
  FeedforwardOptions options_;
  std::vector<Affine> layers_;
};

NABU_REGISTER_WITH_OPTIONS(model_registry, "feedforward",
                           (make_model<FeedforwardModel, FeedforwardOptions>), FeedforwardOptions,
                           "stacked fully connected layers on the last axis")

// ---------------------------------------------------------------------------------- concat

struct ConcatOptions {
  std::string architecture;
  bool trainable = true;
  std::vector<bool> select_inputs, flatten_last_2_dims, expand_dim_to_first_input;
  int expand_dimension = -2;
  std::vector<double> input_noise;

  void declare(OptionsReader& r) {
    declare_common(r, architecture, trainable);
    r("select_inputs", select_inputs, "per input: False drops it (default: all kept)");
    r("flatten_last_2_dims", flatten_last_2_dims,
      "per input: True merges its last two axes (default: none)");
    r("expand_dim_to_first_input", expand_dim_to_first_input,
      "per input: True inserts an axis at expand_dimension, tiled to the first input's size "
      "there (default: every input but the first)");
    r("expand_dimension", expand_dimension, "the axis that expanded inputs get");
    r("input_noise", input_noise, "per input: stddev of Gaussian noise in training");
    r.accepted("dropout", "concat has no dropout");
    for (double stddev : input_noise)
      r.require(stddev >= 0.0, "input_noise", "must be >= 0");
  }
};

class ConcatModel : public Model {
 public:
  ConcatModel(const std::string& name, const std::string& where, ConcatOptions options)
      : Model(name, "concat", options.trainable, where), options_(std::move(options)) {}

 protected:
  void build(const std::vector<torch::Tensor>&) override {}

  // The list for `key`, or `fallback` when the key is absent; a list shorter than the inputs is
  // an error (the original would index past it or silently drop inputs).
  std::vector<bool> flags(const std::vector<bool>& given, const std::string& key,
                          std::size_t count, std::vector<bool> fallback) const {
    if (given.empty()) return fallback;
    if (given.size() < count)
      throw Error(describe() + ": " + key + " has " + std::to_string(given.size()) +
                  " values but the model has " + std::to_string(count) + " inputs");
    return given;
  }

  torch::Tensor forward_impl(const std::vector<torch::Tensor>& raw_inputs, const torch::Tensor&,
                             bool training) override {
    std::size_t count = raw_inputs.size();
    std::vector<torch::Tensor> inputs = raw_inputs;
    if (training && !options_.input_noise.empty()) {
      if (options_.input_noise.size() < count)
        throw Error(describe() + ": input_noise has " +
                    std::to_string(options_.input_noise.size()) + " values but the model has " +
                    std::to_string(count) + " inputs");
      for (std::size_t i = 0; i < count; ++i)
        inputs[i] = add_input_noise(inputs[i], options_.input_noise[i], training);
    }
    auto select = flags(options_.select_inputs, "select_inputs", count,
                        std::vector<bool>(count, true));
    auto flatten = flags(options_.flatten_last_2_dims, "flatten_last_2_dims", count,
                         std::vector<bool>(count, false));
    std::vector<bool> default_expand(count, true);
    default_expand[0] = false;
    auto expand = flags(options_.expand_dim_to_first_input, "expand_dim_to_first_input", count,
                        default_expand);

    std::vector<torch::Tensor> kept;
    std::vector<bool> kept_expand;
    for (std::size_t i = 0; i < count; ++i) {
      if (!select[i]) continue;
      auto input = inputs[i];
      if (flatten[i]) {
        if (input.dim() < 2) throw Error(describe() + ": cannot flatten a 1-D input");
        input = input.flatten(-2, -1);
      }
      kept.push_back(input);
      kept_expand.push_back(expand[i]);
    }
    if (kept.empty()) throw Error(describe() + ": select_inputs keeps no input");
    if (kept.size() == 1) return kept[0];
    if (kept_expand[0])
      throw Error(describe() +
                  ": expand_dim_to_first_input cannot be True for the first (selected) input");

    const auto& first = kept[0];
    int64_t axis = options_.expand_dimension;
    int64_t rank = first.dim();
    if (axis < -rank || axis >= rank)
      throw Error(describe() + ": expand_dimension " + std::to_string(axis) +
                  " is outside the first input's " + std::to_string(rank) + " axes");
    int64_t size = first.size(axis);
    for (std::size_t i = 1; i < kept.size(); ++i) {
      if (!kept_expand[i]) continue;
      auto expanded = kept[i].unsqueeze(axis);
      if (expanded.dim() != rank)
        throw Error(describe() + ": input " + std::to_string(i) +
                    " has the wrong rank to be expanded to the first input's " +
                    std::to_string(rank) + " axes");
      std::vector<int64_t> sizes(expanded.sizes().begin(), expanded.sizes().end());
      int64_t positive_axis = axis < 0 ? axis + rank : axis;
      sizes[positive_axis] = size;
      kept[i] = expanded.expand(sizes);
    }
    for (std::size_t i = 1; i < kept.size(); ++i) {
      if (kept[i].dim() != rank || !std::equal(kept[i].sizes().begin(), kept[i].sizes().end() - 1,
                                               first.sizes().begin())) {
        std::ostringstream message;
        message << describe() << ": cannot concatenate input " << i << " of shape "
                << kept[i].sizes() << " with the first input of shape " << first.sizes()
                << " on the last axis";
        throw Error(message.str());
      }
    }
    return torch::cat(kept, -1);
  }

 private:
  ConcatOptions options_;
};

NABU_REGISTER_WITH_OPTIONS(model_registry, "concat", (make_model<ConcatModel, ConcatOptions>),
                           ConcatOptions,
                           "joins its inputs on the last axis (with selection, flattening and "
                           "tiling to the first input)")

// ---------------------------------------------------------------------- constant_generator

struct ConstantGeneratorOptions {
  std::string architecture;
  bool trainable = true;
  double constant_value = 0.0;
  std::string tensor_shape;
  bool include_batch_size = false;
  double output_noise = 0.0;
  std::vector<int64_t> shape;  // parsed tensor_shape

  void declare(OptionsReader& r) {
    declare_common(r, architecture, trainable);
    r("constant_value", constant_value, "the value of every element");
    r("tensor_shape", tensor_shape, "the shape, sizes separated by ',' (e.g. '20' or '2,3')");
    r("include_batch_size", include_batch_size,
      "True prepends the batch size of the first input");
    r("output_noise", output_noise, "stddev of Gaussian noise added in training");
    r.accepted("input_noise", "the inputs only give the batch size");
    r.accepted("dropout", "constant_generator has no dropout");
    shape.clear();
    std::string separated = tensor_shape;
    for (char& c : separated)
      if (c == ',') c = ' ';
    for (const auto& token : split_whitespace(separated)) {
      auto value = parse_int(token);
      r.require(value && *value > 0, "tensor_shape",
                     "expected positive sizes separated by ',', got '" + shorten(tensor_shape) +
                         "'");
      if (value) shape.push_back(*value);
    }
    r.require(!shape.empty() || include_batch_size, "tensor_shape",
                   "required: the shape of the constant");
  }
};

class ConstantGeneratorModel : public Model {
 public:
  ConstantGeneratorModel(const std::string& name, const std::string& where,
                         ConstantGeneratorOptions options)
      : Model(name, "constant_generator", options.trainable, where),
        options_(std::move(options)) {}

 protected:
  void build(const std::vector<torch::Tensor>&) override {}

  torch::Tensor forward_impl(const std::vector<torch::Tensor>& inputs, const torch::Tensor&,
                             bool training) override {
    std::vector<int64_t> shape = options_.shape;
    if (options_.include_batch_size) shape.insert(shape.begin(), inputs[0].size(0));
    auto output = torch::full(shape, options_.constant_value,
                              torch::TensorOptions().dtype(torch::kFloat32).device(
                                  inputs[0].device()));
    return add_input_noise(output, options_.output_noise, training);
  }

 private:
  ConstantGeneratorOptions options_;
};

NABU_REGISTER_WITH_OPTIONS(model_registry, "constant_generator",
                           (make_model<ConstantGeneratorModel, ConstantGeneratorOptions>),
                           ConstantGeneratorOptions,
                           "a constant tensor (optionally per batch element), e.g. an indicator")

}  // namespace
}  // namespace nabu
