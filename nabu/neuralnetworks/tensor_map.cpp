#include "nabu/neuralnetworks/tensor_map.h"

#include "nabu/core/error.h"
#include "nabu/core/strings.h"

namespace nabu {

const torch::Tensor& get_tensor(const TensorMap& tensors, const std::string& name,
                                const std::string& what) {
  auto it = tensors.find(name);
  if (it == tensors.end()) {
    std::vector<std::string> names;
    for (const auto& entry : tensors) names.push_back(entry.first);
    throw Error(what + " needs a tensor named '" + name + "' but got: " + join(names, ", ") +
                did_you_mean(name, names));
  }
  return it->second;
}

torch::Tensor frame_mask(const torch::Tensor& seq_lengths, int64_t frames,
                         torch::ScalarType dtype) {
  // Where the lengths are (a GPU's when the batch is there): a comparison of a CPU and a GPU
  // tensor is an error.
  auto steps =
      torch::arange(frames, torch::TensorOptions().dtype(torch::kLong).device(seq_lengths.device()));
  return (steps.unsqueeze(0) < seq_lengths.to(torch::kLong).unsqueeze(1)).to(dtype);
}

}  // namespace nabu
