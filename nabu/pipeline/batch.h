// A batch of named tensors as the pipeline hands it to a task, and the two views a task takes of
// it: the model inputs and the loss targets. Tensors are batch-first and zero-padded; lengths
// travel with them, one per example and name.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace nabu {

// Named tensors of one batch: inputs, targets or model outputs, batch-first [B, T, ...].
using TensorMap = std::map<std::string, torch::Tensor>;

// An input or target name and the database sections that feed it (several sections concatenate
// datasets; docs/data_layout.md).
struct DataBinding {
  std::string name;
  std::vector<std::string> sections;
};

// A zero-padded batch: [B, T_max(name), ...] per name and the real lengths per name.
struct Batch {
  std::map<std::string, torch::Tensor> data;
  std::map<std::string, torch::Tensor> lengths;  // int64 [B]
  std::vector<std::string> names;                // example names
  int64_t real_frames = 0, padded_frames = 0;    // of the first data name
  int64_t size() const { return static_cast<int64_t>(names.size()); }
};

// The batch with its tensors on `device` (the same batch on the CPU). Pinned tensors (see
// pin_memory) are copied without blocking the host.
Batch on_device(Batch batch, const torch::Device& device);
// Page-locks the batch's tensors, so that their copy to a GPU can overlap the computation (the
// input pipeline's loader threads do it when the models compute on a GPU).
void pin_memory(Batch& batch);

// Model inputs of a batch (bool/int data as float).
TensorMap model_inputs(const Batch& batch, const std::vector<std::string>& input_names);
// Targets of a batch by name.
TensorMap batch_targets(const Batch& batch, const std::vector<std::string>& target_names);

}  // namespace nabu
