#include "nabu/neuralnetworks/models/model_graph.h"

#include <algorithm>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"

namespace nabu {

namespace {

struct ParsedGraph {
  std::vector<std::string> inputs, outputs;
  std::vector<ModelGraph::Node> nodes;
  std::map<std::string, std::string> length_sources;
  std::vector<std::string> problems;
};

// Reads and checks the graph keys of a task section (docs/models.md), one step a method; every
// problem is collected, one message each, naming file:line [section] key.
class GraphParser {
 public:
  explicit GraphParser(const ConfigSection& task) : task_(task) {}

  ParsedGraph parse(const std::vector<std::string>& models) {
    for (const char* key : {"inputs", "nodes", "outputs"})
      if (!task_.has(key)) problem(key, "missing key (the task's model graph needs it)");
    graph_.inputs = task_.get_list("inputs", {});
    graph_.outputs = task_.get_list("outputs", {});
    available_.insert(graph_.inputs.begin(), graph_.inputs.end());
    for (const auto& input : graph_.inputs) graph_.length_sources[input] = input;
    const std::vector<std::string> node_names = task_.get_list("nodes", {});
    find_producers(node_names);
    for (const auto& node : node_names) add_node(node, models);
    for (const auto& output : graph_.outputs) {
      if (available_.count(output)) continue;
      std::vector<std::string> candidates(available_.begin(), available_.end());
      problem("outputs", "'" + output + "' is neither a node nor a task input" +
                             did_you_mean(output, candidates));
    }
    return graph_;
  }

 private:
  void problem(const std::string& key, const std::string& message) {
    graph_.problems.push_back(task_.where(key) + ": " + message);
  }

  // The name a node's output goes by: <node>_output_names (one name), or the node's.
  std::string output_of(const std::string& node, bool report) {
    if (!task_.has(node + "_output_names")) return node;
    auto names = task_.get_list(node + "_output_names");
    if (names.size() == 1) return names[0];
    if (report)
      problem(node + "_output_names",
              "every model has one output, so give exactly one name (got " +
                  std::to_string(names.size()) + ")");
    return node;
  }

  // Every node's output name, to tell "later node" from "unknown name".
  void find_producers(const std::vector<std::string>& node_names) {
    std::set<std::string> seen_nodes;
    for (const auto& node : node_names) {
      if (!seen_nodes.insert(node).second) problem("nodes", "node '" + node + "' is listed twice");
      const std::string output = output_of(node, /*report=*/true);
      if (available_.count(output) &&
          std::find(graph_.inputs.begin(), graph_.inputs.end(), output) != graph_.inputs.end())
        problem("nodes", "node output '" + output + "' has the name of a task input");
      producers_.emplace(output, node);
    }
  }

  // A node's inputs must be task inputs or outputs of earlier nodes.
  void check_input(const std::string& node, const std::string& key, const std::string& input) {
    if (available_.count(input)) return;
    auto producer = producers_.find(input);
    if (producer != producers_.end()) {
      problem(key, "'" + input + "' is produced by node '" + producer->second +
                       "', which does not come before node '" + node +
                       "' in nodes (nodes run in the listed order)");
    } else {
      std::vector<std::string> candidates(available_.begin(), available_.end());
      problem(key, "'" + input + "' is neither a task input nor an earlier node" +
                       did_you_mean(input, candidates) + "; available: " + join(candidates, ", "));
    }
  }

  void add_node(const std::string& node, const std::vector<std::string>& models) {
    ModelGraph::Node entry;
    entry.name = node;
    entry.output = output_of(node, /*report=*/false);
    const std::string model_key = node + "_model";
    if (!task_.has(model_key)) {
      problem(model_key, "missing key: the model of node '" + node + "'");
    } else {
      entry.model = trim(task_.get_string(model_key));
      if (std::find(models.begin(), models.end(), entry.model) == models.end())
        problem(model_key, "unknown model '" + entry.model + "'" +
                               did_you_mean(entry.model, models) +
                               "; model.cfg [hyper] model_names has: " + join(models, ", "));
    }
    const std::string inputs_key = node + "_inputs";
    if (!task_.has(inputs_key)) {
      problem(inputs_key, "missing key: the inputs of node '" + node + "'");
    } else {
      entry.inputs = task_.get_list(inputs_key);
      if (entry.inputs.empty()) problem(inputs_key, "node '" + node + "' has no inputs");
      for (const auto& input : entry.inputs) check_input(node, inputs_key, input);
    }
    if (!entry.inputs.empty()) {
      auto source = graph_.length_sources.find(entry.inputs[0]);
      graph_.length_sources[entry.output] =
          source != graph_.length_sources.end() ? source->second : entry.inputs[0];
    }
    available_.insert(entry.output);
    graph_.nodes.push_back(entry);
  }

  const ConfigSection& task_;
  ParsedGraph graph_;
  std::set<std::string> available_;                  // task inputs and outputs so far
  std::map<std::string, std::string> producers_;     // node output -> node
};

ParsedGraph parse_graph(const ConfigSection& task, const std::vector<std::string>& models) {
  return GraphParser(task).parse(models);
}

}  // namespace

ModelGraph::ModelGraph(const ConfigSection& task, ModelBank& bank) : bank_(&bank) {
  auto graph = parse_graph(task, bank.names());
  if (!graph.problems.empty()) throw ConfigError(graph.problems.front());
  input_names_ = std::move(graph.inputs);
  output_names_ = std::move(graph.outputs);
  nodes_ = std::move(graph.nodes);
  length_sources_ = std::move(graph.length_sources);
}

std::vector<std::string> ModelGraph::check(const ConfigSection& task, const ConfigFile& model_cfg) {
  std::vector<std::string> models;
  std::vector<std::string> problems;
  if (const ConfigSection* hyper = model_cfg.find_section("hyper")) {
    for (const auto& name : hyper->get_list("model_names", {})) {
      if (model_cfg.has_section(name))
        models.push_back(name);
      else
        problems.push_back(hyper->where("model_names") + ": model '" + name +
                           "' has no section" + did_you_mean(name, model_cfg.section_names()));
    }
  }
  auto graph = parse_graph(task, models);
  problems.insert(problems.end(), graph.problems.begin(), graph.problems.end());
  return problems;
}

TensorMap ModelGraph::forward_all(const TensorMap& inputs,
                                  const std::map<std::string, torch::Tensor>& seq_lengths,
                                  bool training) const {
  TensorMap tensors;
  std::map<std::string, torch::Tensor> lengths;
  for (const auto& name : input_names_) {
    tensors[name] = get_tensor(inputs, name, "the model graph");
    auto it = seq_lengths.find(name);
    if (it != seq_lengths.end()) lengths[name] = it->second;
  }
  for (const auto& node : nodes_) {
    std::vector<torch::Tensor> node_inputs;
    node_inputs.reserve(node.inputs.size());
    for (const auto& input : node.inputs) node_inputs.push_back(tensors.at(input));
    torch::Tensor node_lengths;
    auto it = lengths.find(node.inputs[0]);
    if (it != lengths.end()) node_lengths = it->second;
    try {
      tensors[node.output] = bank_->at(node.model).run(node_inputs, node_lengths, training);
    } catch (const c10::Error& e) {
      throw Error("node '" + node.name + "' (model '" + node.model +
                  "'): " + e.what_without_backtrace());
    }
    if (node_lengths.defined()) lengths[node.output] = node_lengths;
  }
  return tensors;
}

TensorMap ModelGraph::forward(const TensorMap& inputs,
                              const std::map<std::string, torch::Tensor>& seq_lengths,
                              bool training) const {
  auto tensors = forward_all(inputs, seq_lengths, training);
  TensorMap outputs;
  for (const auto& name : output_names_) outputs[name] = tensors.at(name);
  return outputs;
}

void ModelGraph::materialize(const TensorMap& inputs,
                             const std::map<std::string, torch::Tensor>& seq_lengths) const {
  torch::NoGradGuard no_grad;
  forward_all(inputs, seq_lengths, false);
}

std::set<std::string> ModelGraph::used_models() const {
  std::set<std::string> names;
  for (const auto& node : nodes_) names.insert(node.model);
  return names;
}

const std::string& ModelGraph::length_source(const std::string& name) const {
  auto it = length_sources_.find(name);
  if (it == length_sources_.end())
    throw Error("the model graph has no tensor named '" + name + "'");
  return it->second;
}

std::vector<torch::Tensor> ModelGraph::parameters() const {
  return bank_->parameters(used_models(), true);
}

}  // namespace nabu
