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

// Reads and checks the graph keys of a task section (docs/models.md). `models` are the model names
// that exist. Problems are collected, one message each, naming file:line [section] key.
ParsedGraph parse_graph(const ConfigSection& task, const std::vector<std::string>& models) {
  ParsedGraph graph;
  auto problem = [&](const std::string& key, const std::string& message) {
    graph.problems.push_back(task.where(key) + ": " + message);
  };
  for (const char* key : {"inputs", "nodes", "outputs"})
    if (!task.has(key)) problem(key, "missing key (the task's model graph needs it)");
  graph.inputs = task.get_list("inputs", {});
  graph.outputs = task.get_list("outputs", {});

  std::set<std::string> available(graph.inputs.begin(), graph.inputs.end());
  for (const auto& input : graph.inputs) graph.length_sources[input] = input;
  // Every node's output name, to tell "later node" from "unknown name".
  std::map<std::string, std::string> producers;
  std::vector<std::string> node_names = task.get_list("nodes", {});
  std::set<std::string> seen_nodes;
  for (const auto& node : node_names) {
    if (!seen_nodes.insert(node).second) problem("nodes", "node '" + node + "' is listed twice");
    std::string output = node;
    if (task.has(node + "_output_names")) {
      auto names = task.get_list(node + "_output_names");
      if (names.size() != 1)
        problem(node + "_output_names",
                "every model has one output, so give exactly one name (got " +
                    std::to_string(names.size()) + ")");
      else
        output = names[0];
    }
    if (available.count(output) && std::find(graph.inputs.begin(), graph.inputs.end(), output) !=
                                       graph.inputs.end())
      problem("nodes", "node output '" + output + "' has the name of a task input");
    producers.emplace(output, node);
  }

  std::vector<std::string> produced;
  for (const auto& node : node_names) {
    ModelGraph::Node entry;
    entry.name = node;
    entry.output = node;
    if (task.has(node + "_output_names")) {
      auto names = task.get_list(node + "_output_names");
      if (names.size() == 1) entry.output = names[0];
    }
    const std::string model_key = node + "_model";
    if (!task.has(model_key)) {
      problem(model_key, "missing key: the model of node '" + node + "'");
    } else {
      entry.model = trim(task.get_string(model_key));
      if (std::find(models.begin(), models.end(), entry.model) == models.end())
        problem(model_key, "unknown model '" + entry.model + "'" +
                               did_you_mean(entry.model, models) +
                               "; model.cfg [hyper] model_names has: " + join(models, ", "));
    }
    const std::string inputs_key = node + "_inputs";
    if (!task.has(inputs_key)) {
      problem(inputs_key, "missing key: the inputs of node '" + node + "'");
    } else {
      entry.inputs = task.get_list(inputs_key);
      if (entry.inputs.empty()) problem(inputs_key, "node '" + node + "' has no inputs");
      for (const auto& input : entry.inputs) {
        if (available.count(input)) continue;
        auto producer = producers.find(input);
        if (producer != producers.end()) {
          problem(inputs_key, "'" + input + "' is produced by node '" + producer->second +
                                  "', which does not come before node '" + node +
                                  "' in nodes (nodes run in the listed order)");
        } else {
          std::vector<std::string> candidates(available.begin(), available.end());
          problem(inputs_key, "'" + input + "' is neither a task input nor an earlier node" +
                                  did_you_mean(input, candidates) +
                                  "; available: " + join(candidates, ", "));
        }
      }
    }
    if (!entry.inputs.empty()) {
      auto source = graph.length_sources.find(entry.inputs[0]);
      graph.length_sources[entry.output] =
          source != graph.length_sources.end() ? source->second : entry.inputs[0];
    }
    available.insert(entry.output);
    produced.push_back(entry.output);
    graph.nodes.push_back(entry);
  }
  for (const auto& output : graph.outputs) {
    if (available.count(output)) continue;
    std::vector<std::string> candidates(available.begin(), available.end());
    problem("outputs", "'" + output + "' is neither a node nor a task input" +
                           did_you_mean(output, candidates));
  }
  return graph;
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
