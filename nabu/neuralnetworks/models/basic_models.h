// The options of the linear model (basic_models.cpp), apart from it so that export/ can write a
// built one's forward pass from them and its parameters (export/model_writers.h).
#pragma once

#include <string>
#include <vector>

#include "nabu/neuralnetworks/models/model.h"

namespace nabu {

struct LinearOptions {
  std::string architecture;
  bool trainable = true;
  std::vector<int> output_dims;
  Activation activation = Activation::kNone;
  bool no_bias = false;
  double input_noise = 0.0;
  double dropout = 1.0;
  bool last_only = false;

  void declare(OptionsReader& r) {
    declare_common(r, architecture, trainable);
    r("output_dims", output_dims,
      "output shape: one size, or several to reshape the last axis into (e.g. '129 20')");
    declare_activation(r, "activation_func", activation,
                       {"None", "tanh", "sigmoid", "relu", "softmax"},
                       "activation after the affine map (softmax over the last axis)");
    r("no_bias", no_bias, "True drops the bias");
    r("input_noise", input_noise, "stddev of Gaussian noise added to the input in training");
    r("dropout", dropout, "dropout KEEP probability on the output in training (1.0 = none)");
    r("last_only", last_only, "True keeps only the last frame (output [B,1,...])");
    r.require(!output_dims.empty(), "output_dims", "required: the output shape");
    for (int dim : output_dims) r.require(dim > 0, "output_dims", "sizes must be > 0");
    r.require(dropout > 0.0 && dropout <= 1.0, "dropout",
                   "is a keep probability in (0, 1]");
  }
};

// A built model's options, or null when `model` is not a linear model.
const LinearOptions* linear_options(const Model& model);

}  // namespace nabu
