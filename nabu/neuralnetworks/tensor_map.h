#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

#include "nabu/pipeline/batch.h"

namespace nabu {

// The tensor called `name`, or an Error naming `what` and the available names.
const torch::Tensor& get_tensor(const TensorMap& tensors, const std::string& name,
                                const std::string& what);

// Mask [B, T] (float, 1 on real frames) from sequence lengths [B] and a frame count T.
torch::Tensor frame_mask(const torch::Tensor& seq_lengths, int64_t frames,
                         torch::ScalarType dtype = torch::kFloat32);

}  // namespace nabu
