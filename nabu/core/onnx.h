// ONNX models written by hand (`nabu export --format=onnx`): a graph of nodes, its initializers
// (the trained parameters and constants), its inputs and outputs, serialised as an ONNX ModelProto
// in the protocol-buffer wire format (onnx/onnx.proto, proto2; ir_version 8, the default domain at
// opset 17). Only the fields Nabu needs are written; libprotobuf and the generated classes of
// onnx.proto would bring a build-time protoc step for them. onnx.checker and onnxruntime read the
// files in tests/export/check_onnx.py.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nabu::onnx {

constexpr int64_t kOpset = 17;

enum class ElementType : int { kFloat = 1, kInt64 = 7, kDouble = 11 };

struct Attribute {
  enum class Kind { kInt, kFloat, kInts, kString } kind = Kind::kInt;
  std::string name;
  int64_t i = 0;
  float f = 0;
  std::vector<int64_t> ints;
  std::string s;
};
Attribute int_attribute(const std::string& name, int64_t value);
Attribute float_attribute(const std::string& name, float value);
Attribute ints_attribute(const std::string& name, std::vector<int64_t> values);
Attribute string_attribute(const std::string& name, const std::string& value);

// A dimension of a graph input or output: a number, or a name for one that varies.
struct Dim {
  int64_t value = 0;
  std::string name;
};

class Graph {
 public:
  // A node; returns the name of its output (made unique).
  std::string node(const std::string& op, const std::vector<std::string>& inputs,
                   const std::vector<Attribute>& attributes = {});
  // Initializers: returns their names (`name` made unique).
  std::string floats(const std::string& name, const std::vector<int64_t>& dims,
                     const std::vector<float>& values);
  std::string doubles(const std::string& name, const std::vector<int64_t>& dims,
                      const std::vector<double>& values);
  std::string int64s(const std::string& name, const std::vector<int64_t>& dims,
                     const std::vector<int64_t>& values);
  // Shorthands: a float scalar, a 1-D int64 list, an int64 scalar.
  std::string scalar(float value);
  std::string ints(const std::vector<int64_t>& values);
  std::string int_scalar(int64_t value);
  void input(const std::string& name, ElementType type, const std::vector<Dim>& dims);
  // Declares `value` (a node's output) as the graph output `name` (an Identity node).
  void output(const std::string& value, const std::string& name, ElementType type,
              const std::vector<Dim>& dims);
  // The ModelProto's bytes.
  std::string serialise(const std::string& graph_name, const std::string& producer) const;

 private:
  std::string unique(const std::string& base);
  std::string initializer(const std::string& name, ElementType type,
                          const std::vector<int64_t>& dims, const std::string& raw);
  std::vector<std::string> nodes_, initializers_, inputs_, outputs_;
  int64_t counter_ = 0;
};

// Every frame of `frames` [..., T, L] (`rank` axes; L = `pieces` steps) added in at its step:
// [..., (T - 1) step + L], the overlap-add of framed signals (torch's fold with one row).
std::string overlap_add(Graph& graph, const std::string& frames, int64_t rank, int64_t step,
                        int64_t pieces);

}  // namespace nabu::onnx
