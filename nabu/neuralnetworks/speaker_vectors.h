// Speaker vectors shared by a model and the losses (docs/losses.md): the attractor model and the
// deep attractor loss both average embeddings over the bins each speaker owns, and normalise
// rows as tf.nn.l2_normalize does.
#pragma once

#include <torch/torch.h>

namespace nabu {

// x / sqrt(max(Σx², epsilon)) over the last dimension, as tf.nn.l2_normalize (docs/losses.md).
torch::Tensor l2_normalize_last(const torch::Tensor& x, double epsilon = 1e-12);
// The mean of `vectors` [B, N, D] over the bins each speaker owns, `owners` [B, N, S] (weights,
// zero on bins that do not count): [B, S, D]. A speaker owning no bin gets count 1, so a zero
// vector (the original's attractors, shared by the deepattractornet loss and the attractor model).
torch::Tensor mean_vector_per_speaker(const torch::Tensor& vectors, const torch::Tensor& owners);

}  // namespace nabu
