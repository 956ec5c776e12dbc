#include "nabu/pipeline/batch.h"

namespace nabu {

Batch on_device(Batch batch, const torch::Device& device) {
  if (device.is_cpu()) return batch;
  for (auto* tensors : {&batch.data, &batch.lengths})
    for (auto& [name, tensor] : *tensors)
      tensor = tensor.to(device, /*non_blocking=*/tensor.is_pinned());
  return batch;
}

void pin_memory(Batch& batch) {
  for (auto* tensors : {&batch.data, &batch.lengths})
    for (auto& [name, tensor] : *tensors) tensor = tensor.pin_memory();
}

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
