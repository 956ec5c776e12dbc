#include "nabu/pipeline/batch.h"

namespace nabu {

TensorMap model_inputs(const Batch& batch, const std::vector<std::string>& input_names) {
  TensorMap inputs;
  for (const auto& name : input_names) {
    const auto& tensor = batch.data.at(name);
    inputs[name] = tensor.is_floating_point() ? tensor : tensor.to(torch::kFloat32);
  }
  return inputs;
}

TensorMap batch_targets(const Batch& batch, const std::vector<std::string>& target_names) {
  TensorMap targets;
  for (const auto& name : target_names) targets[name] = batch.data.at(name);
  return targets;
}

}  // namespace nabu
