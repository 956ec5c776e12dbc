// ModelGraph: the models of one task wired together (docs/models.md, the original's
// run_multi_model.py), read from a task section of trainer.cfg / validation_evaluator.cfg /
// test_evaluator.cfg:
//
//   inputs  = features ivecs          names of the task's input tensors
//   nodes   = n0 n1 bin_emb           run in this order (no sorting)
//   n0_model = concat                 a model name of model.cfg [hyper] model_names
//   n0_inputs = features ivecs        task inputs or earlier nodes; the first one's sequence
//                                     lengths are the node's
//   n0_output_names = x               optional: store the node's tensor under another name
//   outputs = bin_emb                 what forward() returns
//
// Models come from a shared ModelBank (which must outlive the graph), so the same model name in
// two nodes or two tasks is one set of weights.
#pragma once

#include <torch/torch.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/neuralnetworks/models/model_bank.h"
#include "nabu/neuralnetworks/tensor_map.h"

namespace nabu {

class ModelGraph {
 public:
  struct Node {
    std::string name;                 // the node (and by default its output's) name
    std::string model;                // model name in the bank
    std::vector<std::string> inputs;  // task inputs or earlier nodes' outputs
    std::string output;               // name its tensor is stored under
  };

  // Throws ConfigError naming file:line [section] key for a missing key, an input that is not a
  // task input or an earlier node, an unknown model name (with a suggestion) or an unknown output.
  ModelGraph(const ConfigSection& task, ModelBank& bank);

  // All problems of a task section's graph against model.cfg, without creating any model.
  static std::vector<std::string> check(const ConfigSection& task, const ConfigFile& model_cfg);

  // inputs: every name of input_names() (extra entries are ignored); seq_lengths: int64 [B] per
  // input name (an input without lengths counts all its frames as real). Returns the tensors
  // named in output_names().
  TensorMap forward(const TensorMap& inputs,
                    const std::map<std::string, torch::Tensor>& seq_lengths, bool training) const;
  // Like forward, but every node's tensor (by output name) together with the task inputs.
  TensorMap forward_all(const TensorMap& inputs,
                        const std::map<std::string, torch::Tensor>& seq_lengths,
                        bool training) const;
  // Creates the parameters of every used model with one forward pass on `inputs` (no gradients,
  // no noise or dropout, so no random numbers are drawn beyond the initialisation).
  void materialize(const TensorMap& inputs,
                   const std::map<std::string, torch::Tensor>& seq_lengths) const;

  std::set<std::string> used_models() const;
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  // The task input whose sequence lengths a node output or input carries.
  const std::string& length_source(const std::string& name) const;
  // The trainable parameters of used_models(), in the bank's order.
  std::vector<torch::Tensor> parameters() const;
  const ModelBank& bank() const { return *bank_; }

 private:
  ModelBank* bank_;
  std::vector<std::string> input_names_, output_names_;
  std::vector<Node> nodes_;
  std::map<std::string, std::string> length_sources_;
};

}  // namespace nabu
