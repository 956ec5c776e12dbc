#include "nabu/core/onnx.h"

#include "nabu/core/protobuf_wire.h"

namespace nabu::onnx {

namespace {

using namespace wire;

// Field numbers of onnx.proto: ModelProto ir_version 1, producer_name 2, graph 7, opset_import 8;
// OperatorSetIdProto domain 1, version 2; GraphProto node 1, name 2, initializer 5, input 11,
// output 12; NodeProto input 1, output 2, name 3, op_type 4, attribute 5; AttributeProto name 1,
// f 2, i 3, s 4, ints 8, type 20 (FLOAT 1, INT 2, STRING 3, INTS 7); TensorProto dims 1, data_type 2, name 8,
// raw_data 9; ValueInfoProto name 1, type 2; TypeProto tensor_type 1; TypeProto.Tensor
// elem_type 1, shape 2; TensorShapeProto dim 1; Dimension dim_value 1, dim_param 2.
std::string tensor(const std::string& name, ElementType type, const std::vector<int64_t>& dims,
                   const std::string& raw) {
  std::string out;
  for (int64_t dim : dims) put_int64(out, 1, dim);
  put_int64(out, 2, static_cast<int64_t>(type));
  put_bytes(out, 8, name);
  put_bytes(out, 9, raw);
  return out;
}

template <class T>
std::string raw_bytes(const std::vector<T>& values) {
  std::string raw;
  raw.reserve(values.size() * sizeof(T));
  for (T value : values) put_little_endian(raw, value);
  return raw;
}

std::string value_info(const std::string& name, ElementType type, const std::vector<Dim>& dims) {
  std::string shape;
  for (const auto& dim : dims) {
    std::string d;
    if (dim.name.empty())
      put_int64(d, 1, dim.value);
    else
      put_bytes(d, 2, dim.name);
    put_bytes(shape, 1, d);
  }
  std::string tensor_type;
  put_int64(tensor_type, 1, static_cast<int64_t>(type));
  put_bytes(tensor_type, 2, shape);
  std::string type_proto;
  put_bytes(type_proto, 1, tensor_type);
  std::string out;
  put_bytes(out, 1, name);
  put_bytes(out, 2, type_proto);
  return out;
}

}  // namespace

Attribute int_attribute(const std::string& name, int64_t value) {
  return {Attribute::Kind::kInt, name, value, 0.0F, {}, ""};
}

Attribute float_attribute(const std::string& name, float value) {
  return {Attribute::Kind::kFloat, name, 0, value, {}, ""};
}

Attribute ints_attribute(const std::string& name, std::vector<int64_t> values) {
  return {Attribute::Kind::kInts, name, 0, 0.0F, std::move(values), ""};
}

Attribute string_attribute(const std::string& name, const std::string& value) {
  return {Attribute::Kind::kString, name, 0, 0.0F, {}, value};
}

std::string Graph::unique(const std::string& base) {
  return base + "_" + std::to_string(counter_++);
}

std::string Graph::node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<Attribute>& attributes) {
  const std::string output = unique(op);
  std::string out;
  for (const auto& input : inputs) put_bytes(out, 1, input);
  put_bytes(out, 2, output);
  put_bytes(out, 3, output);
  put_bytes(out, 4, op);
  for (const auto& attribute : attributes) {
    std::string a;
    put_bytes(a, 1, attribute.name);
    switch (attribute.kind) {
      case Attribute::Kind::kInt:
        put_int64(a, 3, attribute.i);
        put_int64(a, 20, 2);
        break;
      case Attribute::Kind::kFloat:
        put_float(a, 2, attribute.f);
        put_int64(a, 20, 1);
        break;
      case Attribute::Kind::kInts:
        for (int64_t value : attribute.ints) put_int64(a, 8, value);
        put_int64(a, 20, 7);
        break;
      case Attribute::Kind::kString:
        put_bytes(a, 4, attribute.s);
        put_int64(a, 20, 3);
        break;
    }
    put_bytes(out, 5, a);
  }
  nodes_.push_back(out);
  return output;
}

std::string Graph::initializer(const std::string& name, ElementType type,
                               const std::vector<int64_t>& dims, const std::string& raw) {
  const std::string unique_name = unique(name);
  initializers_.push_back(tensor(unique_name, type, dims, raw));
  return unique_name;
}

std::string Graph::floats(const std::string& name, const std::vector<int64_t>& dims,
                          const std::vector<float>& values) {
  return initializer(name, ElementType::kFloat, dims, raw_bytes(values));
}

std::string Graph::doubles(const std::string& name, const std::vector<int64_t>& dims,
                           const std::vector<double>& values) {
  return initializer(name, ElementType::kDouble, dims, raw_bytes(values));
}

std::string Graph::int64s(const std::string& name, const std::vector<int64_t>& dims,
                          const std::vector<int64_t>& values) {
  return initializer(name, ElementType::kInt64, dims, raw_bytes(values));
}

std::string Graph::scalar(float value) { return floats("scalar", {}, {value}); }

std::string Graph::ints(const std::vector<int64_t>& values) {
  return int64s("ints", {static_cast<int64_t>(values.size())}, values);
}

std::string Graph::int_scalar(int64_t value) { return int64s("int", {}, {value}); }

void Graph::input(const std::string& name, ElementType type, const std::vector<Dim>& dims) {
  inputs_.push_back(value_info(name, type, dims));
}

void Graph::output(const std::string& value, const std::string& name, ElementType type,
                   const std::vector<Dim>& dims) {
  std::string out;
  put_bytes(out, 1, value);
  put_bytes(out, 2, name);
  put_bytes(out, 3, name);
  put_bytes(out, 4, std::string("Identity"));
  nodes_.push_back(out);
  outputs_.push_back(value_info(name, type, dims));
}

std::string Graph::serialise(const std::string& graph_name, const std::string& producer) const {
  std::string graph;
  for (const auto& node : nodes_) put_bytes(graph, 1, node);
  put_bytes(graph, 2, graph_name);
  for (const auto& initializer : initializers_) put_bytes(graph, 5, initializer);
  for (const auto& input : inputs_) put_bytes(graph, 11, input);
  for (const auto& output : outputs_) put_bytes(graph, 12, output);
  std::string opset;
  put_bytes(opset, 1, std::string());
  put_int64(opset, 2, kOpset);
  std::string model;
  put_int64(model, 1, 8);  // IR version 8: the one of opset 17
  put_bytes(model, 2, producer);
  put_bytes(model, 7, graph);
  put_bytes(model, 8, opset);
  return model;
}

// Every frame of `frames` [..., T, L] (L = pieces steps; `rank` axes) added in at its step:
// [..., (T - 1) step + L]. Piece r (one step long) of every frame laid end to end, shifted by r
// steps, summed over r: only Slice, Reshape, Pad and Add, which onnxruntime runs in double.
std::string overlap_add(Graph& graph, const std::string& frames, int64_t rank, int64_t step,
                        int64_t pieces) {
  auto leading = graph.node("Slice", {graph.node("Shape", {frames}), graph.ints({0}),
                                      graph.ints({rank - 2})});
  auto flat_shape = graph.node("Concat", {leading, graph.ints({-1})}, {int_attribute("axis", 0)});
  std::string total;
  for (int64_t r = 0; r < pieces; ++r) {
    auto piece = graph.node("Slice", {frames, graph.ints({r * step}), graph.ints({(r + 1) * step}),
                                      graph.ints({rank - 1})});
    std::vector<int64_t> pads(static_cast<std::size_t>(2 * (rank - 1)), 0);
    pads[static_cast<std::size_t>(rank - 2)] = r * step;
    pads.back() = (pieces - 1 - r) * step;
    auto shifted =
        graph.node("Pad", {graph.node("Reshape", {piece, flat_shape}), graph.ints(pads)});
    total = r == 0 ? shifted : graph.node("Add", {total, shifted});
  }
  return total;
}

}  // namespace nabu::onnx
