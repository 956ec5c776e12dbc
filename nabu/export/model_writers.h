// How export/ writes a built model's forward pass, one unpadded batch, as TorchScript source and
// as ONNX nodes: a writer per architecture, registered by name (the writers of the frame models,
// the time-domain models and tf_gridnet are in export/writers/), so that the model classes hold
// only their LibTorch forward and the exporters read a model through its options and parameters.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nabu/neuralnetworks/models/model.h"

namespace nabu {

namespace onnx {
class Graph;
}

struct ModelWriter {
  // `forward(self, x: Tensor) -> Tensor` (and the methods it calls) of a module holding the
  // model's parameters as attributes named as in named_parameters() with '.' -> '_'; empty when
  // this model of the architecture cannot be written (why_not then says why).
  std::function<std::string(const Model&)> torchscript;
  // From the graph value `input` (float: the waveform [B, N] of the time-domain models, frames
  // [B, T, D] of the others) to the name of the value the model computes, its parameters as
  // initializers; empty when this model cannot be written.
  std::function<std::string(const Model&, onnx::Graph&, const std::string&)> onnx;
  // Why a model of the architecture cannot be written in TorchScript (onnx = false) or ONNX.
  std::function<std::string(const Model&, bool onnx)> why_not;
};

// Registers `writer` for each of `architectures`; returns true (for a static registrar).
bool register_model_writer(const std::vector<std::string>& architectures, ModelWriter writer);
// The architectures with a writer that writes, sorted (a writer with only why_not refuses every
// model of its architecture with a reason of its own).
std::vector<std::string> exportable_architectures();

// The model's forward pass as TorchScript source / ONNX nodes. Throw Error naming the model and
// why, for an architecture without a writer or a model its writer cannot write.
std::string model_torchscript(const Model& model);
std::string model_onnx(const Model& model, onnx::Graph& graph, const std::string& input);

// A built model's parameters and buffers by their names in named_parameters() (the writers' view
// of a model); at() throws Error naming the model for a name it does not hold.
class ModelParameters {
 public:
  explicit ModelParameters(const Model& model);
  const torch::Tensor& at(const std::string& name) const;
  bool contains(const std::string& name) const { return values_.count(name) > 0; }
  // The parameters whose names start with `prefix`, in the model's order ("layer0." gives a
  // fused layer's w_ih, w_hh, b_ih, b_hh of each direction).
  std::vector<torch::Tensor> under(const std::string& prefix) const;
  // Their names, in the same order.
  std::vector<std::string> names_under(const std::string& prefix) const;
  // Parameter `name` as a float initializer of `graph` named `name`.
  std::string onnx(onnx::Graph& graph, const std::string& name) const;

 private:
  const Model& model_;
  std::map<std::string, torch::Tensor> values_;
  std::vector<std::string> order_;
};

// The attribute of the exported TorchScript module that holds parameter `name` ('.' -> '_').
std::string script_attribute(std::string name);

// An activation as a TorchScript expression of the expression `input`.
std::string script_activation(Activation activation, const std::string& input);
// The same as an ONNX node on the value `input`; `input` itself for kNone.
std::string onnx_activation(onnx::Graph& graph, Activation activation, const std::string& input);
// One fused recurrent layer as ONNX's `op` (LSTM, GRU, RNN) on the time-major value `x` [T, N, I]:
// LibTorch's parameters (w_ih, w_hh, b_ih, b_hh of each direction) as W, R, B with the gate
// blocks in ONNX's order (LSTM i f g o -> i o f c; GRU r z n -> z r h, linear_before_reset).
// `lengths` (int32 [N], optional) ends each sequence; its backward direction starts there.
// Returns [T, N, directions * hidden], the directions side by side as LibTorch gives them.
std::string onnx_recurrent_layer(onnx::Graph& graph, const std::string& op, const std::string& x,
                                 const std::vector<torch::Tensor>& parameters, int64_t hidden,
                                 bool bidirectional, const std::string& prefix,
                                 const std::string& lengths = "");
// A tensor as a float initializer of `graph` named `name` (made unique); returns its name.
std::string onnx_floats(onnx::Graph& graph, const std::string& name, const torch::Tensor& values);

}  // namespace nabu
