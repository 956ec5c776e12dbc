#include "nabu/export/model_writers.h"

#include <algorithm>

#include "nabu/core/error.h"
#include "nabu/core/onnx.h"
#include "nabu/core/strings.h"

namespace nabu {
namespace {

std::map<std::string, ModelWriter>& writers() {
  static std::map<std::string, ModelWriter> registered;
  return registered;
}

const ModelWriter* writer_of(const Model& model) {
  auto found = writers().find(model.architecture());
  return found == writers().end() ? nullptr : &found->second;
}

// Why `model` cannot be written: its writer's reason, else that its architecture has none.
std::string why_not(const Model& model, const ModelWriter* writer, bool onnx) {
  std::string reason = writer && writer->why_not ? writer->why_not(model, onnx) : "";
  if (reason.empty())
    reason = "architecture " + model.architecture() + " has no " +
             (onnx ? "ONNX" : "TorchScript") + " export (" +
             join(exportable_architectures(), ", ") + " have)";
  return model.describe() + ": " + reason;
}

}  // namespace

bool register_model_writer(const std::vector<std::string>& architectures, ModelWriter writer) {
  for (const auto& architecture : architectures) writers()[architecture] = writer;
  return true;
}

std::vector<std::string> exportable_architectures() {
  std::vector<std::string> names;
  for (const auto& entry : writers())
    if (entry.second.torchscript) names.push_back(entry.first);  // not the refusing ones
  return names;
}

std::string model_torchscript(const Model& model) {
  const ModelWriter* writer = writer_of(model);
  std::string source = writer && writer->torchscript ? writer->torchscript(model) : "";
  if (source.empty()) throw Error(why_not(model, writer, /*onnx=*/false));
  return source;
}

std::string model_onnx(const Model& model, onnx::Graph& graph, const std::string& input) {
  const ModelWriter* writer = writer_of(model);
  std::string value = writer && writer->onnx ? writer->onnx(model, graph, input) : "";
  if (value.empty()) throw Error(why_not(model, writer, /*onnx=*/true));
  return value;
}

ModelParameters::ModelParameters(const Model& model) : model_(model) {
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    values_[item.key()] = item.value();
    order_.push_back(item.key());
  }
  for (const auto& item : model.named_buffers(/*recurse=*/true)) values_[item.key()] = item.value();
}

const torch::Tensor& ModelParameters::at(const std::string& name) const {
  auto found = values_.find(name);
  if (found == values_.end()) throw Error(model_.describe() + ": no parameter " + name + " to export");
  return found->second;
}

std::vector<std::string> ModelParameters::names_under(const std::string& prefix) const {
  std::vector<std::string> names;
  for (const auto& name : order_)
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  return names;
}

std::vector<torch::Tensor> ModelParameters::under(const std::string& prefix) const {
  std::vector<torch::Tensor> found;
  for (const auto& name : names_under(prefix)) found.push_back(values_.at(name));
  return found;
}

std::string ModelParameters::onnx(onnx::Graph& graph, const std::string& name) const {
  return onnx_floats(graph, name, at(name));
}

std::string script_attribute(std::string name) {
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

std::string script_activation(Activation activation, const std::string& input) {
  switch (activation) {
    case Activation::kNone: return input;
    case Activation::kTanh: return "torch.tanh(" + input + ")";
    case Activation::kSigmoid: return "torch.sigmoid(" + input + ")";
    case Activation::kRelu: return "torch.relu(" + input + ")";
    case Activation::kSoftmax: return "torch.softmax(" + input + ", -1)";
  }
  return input;
}

std::string onnx_activation(onnx::Graph& graph, Activation activation, const std::string& input) {
  switch (activation) {
    case Activation::kNone: return input;
    case Activation::kTanh: return graph.node("Tanh", {input});
    case Activation::kSigmoid: return graph.node("Sigmoid", {input});
    case Activation::kRelu: return graph.node("Relu", {input});
    case Activation::kSoftmax: return graph.node("Softmax", {input}, {onnx::int_attribute("axis", -1)});
  }
  return input;
}

std::string onnx_floats(onnx::Graph& graph, const std::string& name, const torch::Tensor& values) {
  auto floats = values.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  std::vector<int64_t> dims(floats.sizes().begin(), floats.sizes().end());
  return graph.floats(name, dims,
                      std::vector<float>(floats.data_ptr<float>(),
                                         floats.data_ptr<float>() + floats.numel()));
}

std::string onnx_recurrent_layer(onnx::Graph& graph, const std::string& op, const std::string& x,
                                 const std::vector<torch::Tensor>& parameters, int64_t hidden,
                                 bool bidirectional, const std::string& prefix,
                                 const std::string& lengths) {
  const std::vector<int64_t> order = op == "LSTM"  ? std::vector<int64_t>{0, 3, 1, 2}
                                     : op == "GRU" ? std::vector<int64_t>{1, 0, 2}
                                                   : std::vector<int64_t>{0};
  auto gates = [&](const torch::Tensor& w) {
    auto blocks = w.chunk(static_cast<int64_t>(order.size()), 0);
    std::vector<torch::Tensor> ordered;
    for (int64_t k : order) ordered.push_back(blocks[static_cast<std::size_t>(k)]);
    return torch::cat(ordered, 0);
  };
  std::vector<torch::Tensor> w, r, b;
  for (std::size_t d = 0; d < (bidirectional ? 2u : 1u); ++d) {
    w.push_back(gates(parameters.at(4 * d)));
    r.push_back(gates(parameters.at(4 * d + 1)));
    b.push_back(torch::cat({gates(parameters.at(4 * d + 2)), gates(parameters.at(4 * d + 3))}));
  }
  std::vector<onnx::Attribute> attributes{
      onnx::int_attribute("hidden_size", hidden),
      onnx::string_attribute("direction", bidirectional ? "bidirectional" : "forward")};
  if (op == "GRU") attributes.push_back(onnx::int_attribute("linear_before_reset", 1));
  std::vector<std::string> inputs{x, onnx_floats(graph, prefix + "W", torch::stack(w)),
                                  onnx_floats(graph, prefix + "R", torch::stack(r)),
                                  onnx_floats(graph, prefix + "B", torch::stack(b))};
  if (!lengths.empty()) inputs.push_back(lengths);
  auto y = graph.node(op, inputs, attributes);  // [T, D, N, H]
  return graph.node("Reshape",
                    {graph.node("Transpose", {y}, {onnx::ints_attribute("perm", {0, 2, 1, 3})}),
                     graph.ints({0, 0, -1})});
}

}  // namespace nabu
