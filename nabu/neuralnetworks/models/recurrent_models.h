// What export/ reads of a built recurrent stack (dblstm, dlstm, dbgru, dbrnn and the leaky
// family of recurrent_models.cpp) to write its forward pass (export/model_writers.h).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "nabu/neuralnetworks/models/model.h"

namespace nabu {

enum class CellKind { kLstm, kGru, kRnn };

struct RecurrentStackLayout {
  CellKind kind = CellKind::kLstm;
  bool bidirectional = true;
  // LibTorch's fused layers, registered as layer0, layer1, ... (w_ih, w_hh, b_ih, b_hh of each
  // direction); false: the stack runs its own cells (layer norm, leaks, recurrent dropout or
  // separate directions).
  bool fused = true;
  std::vector<int64_t> units;  // per layer
  Activation rnn_activation = Activation::kTanh;
};

// The layout of a built stack, or nothing when `model` is not one.
std::optional<RecurrentStackLayout> recurrent_stack_layout(const Model& model);

}  // namespace nabu
