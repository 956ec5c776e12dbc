#include "nabu/neuralnetworks/speaker_vectors.h"

namespace nabu {

torch::Tensor l2_normalize_last(const torch::Tensor& x, double epsilon) {
  // rsqrt of the clamped sum: an all-zero row maps to zero with a finite gradient.
  return x * torch::rsqrt(x.pow(2).sum(-1, /*keepdim=*/true).clamp_min(epsilon));
}

torch::Tensor mean_vector_per_speaker(const torch::Tensor& vectors, const torch::Tensor& owners) {
  auto counts = owners.sum(1).clamp_min(1.0).unsqueeze(-1);  // [B, S, 1]
  return torch::bmm(owners.transpose(1, 2), vectors) / counts;
}

}  // namespace nabu
