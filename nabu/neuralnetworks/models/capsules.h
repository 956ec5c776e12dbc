// Capsule primitives (Sabour et al. 2017, dynamic routing) shared by the capsule architectures
// capsnet and dbr_capsnet (docs/models.md), with the original's definitions.
#pragma once

#include <torch/torch.h>

#include <string>

#include "nabu/core/options.h"

namespace nabu::capsules {

// The keys both capsule architectures read (the original's capsnet.py and dbr_capsnet.py).
struct CapsuleOptions {
  std::string architecture;
  bool trainable = true;
  int num_capsules = 0;
  int capsule_dim = 0;
  int routing_iters = 3;
  int num_layers = 1;
  bool logits_prior = false;
  double input_noise = 0.0;
  double dropout = 1.0;
  void declare(OptionsReader& r);
};

// squash over the last axis: s * |s|^2 / (1 + |s|^2) / sqrt(|s|^2 + 1e-7).
torch::Tensor squash(const torch::Tensor& s);

// The original's vote-transform initialiser for a kernel [Nin, Din, Nout, Dout]: uniform in
// +-sqrt(3 / max(1, (Din + Dout) / 2)).
void vote_transform_uniform_(torch::Tensor& kernel);

// Each input capsule's vote for each output capsule: inputs [..., Nin, Din] and kernel
// [Nin, Din, Nout, Dout] -> predictions [..., Nin, Nout, Dout].
torch::Tensor predict(const torch::Tensor& inputs, const torch::Tensor& kernel);

// Dynamic routing of `predictions` [..., Nin, Nout, Dout] from the initial `logits` [Nin, Nout]
// (broadcast over the leading axes): `iterations` times, weights = softmax of the logits over the
// output capsules, capsules = squash(sum over inputs of weight * prediction), and the logits grow
// by the agreement <prediction, capsule>; the result is squash(sum of weighted predictions) with
// the final logits, [..., Nout, Dout].
torch::Tensor route(const torch::Tensor& predictions, const torch::Tensor& logits, int iterations);

}  // namespace nabu::capsules
