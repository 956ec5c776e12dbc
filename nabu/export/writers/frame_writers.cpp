// The writers of the frame models: linear (basic_models.h) and the fused recurrent stacks
// (recurrent_models.h), as TorchScript and ONNX (export/model_writers.h).
#include "nabu/core/onnx.h"
#include "nabu/export/model_writers.h"
#include "nabu/neuralnetworks/models/basic_models.h"
#include "nabu/neuralnetworks/models/recurrent_models.h"

namespace nabu {
namespace {

// ---------------------------------------------------------------------------------- linear

std::string linear_script(const Model& model) {
  const LinearOptions* o = linear_options(model);
  if (!o) return "";
  std::string script = "def forward(self, x: Tensor) -> Tensor:\n"
                       "    y = torch.matmul(x, self.weights)\n";
  if (!o->no_bias) script += "    y = y + self.biases\n";
  if (o->output_dims.size() > 1) {
    std::string dims;
    for (int dim : o->output_dims) dims += (dims.empty() ? "" : ", ") + std::to_string(dim);
    script += "    y = y.reshape(y.size()[:-1] + [" + dims + "])\n";
  }
  script += "    y = " + script_activation(o->activation, "y") + "\n";
  if (o->last_only) script += "    y = y.select(1, -1).unsqueeze(1)\n";
  return script + "    return y\n";
}

std::string linear_onnx(const Model& model, onnx::Graph& graph, const std::string& input) {
  const LinearOptions* o = linear_options(model);
  if (!o) return "";
  const ModelParameters p(model);
  auto y = graph.node("MatMul", {input, p.onnx(graph, "weights")});
  if (!o->no_bias) y = graph.node("Add", {y, p.onnx(graph, "biases")});
  if (o->output_dims.size() > 1) {
    std::vector<int64_t> shape{0, 0};  // [B, T, ...] of the frame models' inputs
    shape.insert(shape.end(), o->output_dims.begin(), o->output_dims.end());
    y = graph.node("Reshape", {y, graph.ints(shape)});
  }
  y = onnx_activation(graph, o->activation, y);
  if (o->last_only)
    y = graph.node("Unsqueeze", {graph.node("Gather", {y, graph.int_scalar(-1)},
                                            {onnx::int_attribute("axis", 1)}),
                                 graph.ints({1})});
  return y;
}

const bool linear_registered = register_model_writer({"linear"}, {linear_script, linear_onnx, {}});

// ------------------------------------------------------------------------ recurrent stacks

// Fused layer l's parameters as the TorchScript attributes of the exported module.
std::string layer_attributes(const ModelParameters& parameters, std::size_t l) {
  std::string names;
  for (const auto& name : parameters.names_under("layer" + std::to_string(l) + "."))
    names += (names.empty() ? "self." : ", self.") + script_attribute(name);
  return names;
}

// The fused stack on one unpadded batch: LibTorch's lstm/gru/rnn kernels over both directions
// with the layers' own parameters (the fused CPU LSTM computes the same gates, fused_lstm.h).
std::string stack_script(const Model& model) {
  const auto stack = recurrent_stack_layout(model);
  if (!stack || !stack->fused) return "";
  const ModelParameters parameters(model);
  std::string script = "def forward(self, x: Tensor) -> Tensor:\n    y = x\n";
  const std::string directions = stack->bidirectional ? "2" : "1";
  const std::string flags = std::string(", True, 1, 0.0, False, ") +
                            (stack->bidirectional ? "True" : "False") + ", True)";
  for (std::size_t l = 0; l < stack->units.size(); ++l) {
    const std::string weights = layer_attributes(parameters, l);
    script += "    h0 = torch.zeros([" + directions + ", y.size(0), " +
              std::to_string(stack->units[l]) + "], dtype=y.dtype)\n";
    switch (stack->kind) {
      case CellKind::kLstm:
        script += "    y = torch.lstm(y, [h0, h0], [" + weights + "]" + flags + "[0]\n";
        break;
      case CellKind::kGru:
        script += "    y = torch.gru(y, h0, [" + weights + "]" + flags + "[0]\n";
        break;
      case CellKind::kRnn:
        script += std::string("    y = torch.") +
                  (stack->rnn_activation == Activation::kRelu ? "rnn_relu" : "rnn_tanh") +
                  "(y, h0, [" + weights + "]" + flags + "[0]\n";
        break;
    }
  }
  return script + "    return y\n";
}

// ONNX's LSTM/GRU/RNN operators (onnx_recurrent_layer), time-major between the layers.
std::string stack_onnx(const Model& model, onnx::Graph& graph, const std::string& input) {
  const auto stack = recurrent_stack_layout(model);
  if (!stack || !stack->fused ||
      (stack->kind == CellKind::kRnn && stack->rnn_activation != Activation::kTanh))
    return "";
  const char* op = stack->kind == CellKind::kLstm  ? "LSTM"
                   : stack->kind == CellKind::kGru ? "GRU"
                                                   : "RNN";
  const ModelParameters p(model);
  auto y = graph.node("Transpose", {input}, {onnx::ints_attribute("perm", {1, 0, 2})});
  for (std::size_t l = 0; l < stack->units.size(); ++l)
    y = onnx_recurrent_layer(graph, op, y, p.under("layer" + std::to_string(l) + "."),
                             stack->units[l], stack->bidirectional,
                             "layer" + std::to_string(l) + "_");
  return graph.node("Transpose", {y}, {onnx::ints_attribute("perm", {1, 0, 2})});
}

std::string stack_why_not(const Model& model, bool onnx) {
  if (onnx)
    return "architecture " + model.architecture() +
           " runs its own LSTM cells or a relu RNN, which have no ONNX export; plain dblstm, "
           "dlstm, dbgru and dbrnn (tanh) have";
  return "architecture " + model.architecture() +
         " runs its own LSTM cells (layer_norm, leaks, recurrent dropout or separate "
         "directions), which have no TorchScript export; plain dblstm, dlstm, dbgru and dbrnn "
         "have";
}

const bool stacks_registered = register_model_writer(
    {"dblstm", "dlstm", "dbgru", "dbrnn"}, {stack_script, stack_onnx, stack_why_not});
// The leaky family always runs its own cells: refused with the stacks' reason.
const bool leaky_registered = register_model_writer(
    {"leaky_dblstm", "leaky_dblstm_notrec", "leaky_dblstm_iznotrec"}, {{}, {}, stack_why_not});

}  // namespace
}  // namespace nabu
