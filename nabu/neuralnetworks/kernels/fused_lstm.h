// A plain LSTM layer (LibTorch's gate order i, f, g, o and parameter layout) whose time loop and
// its gradient are written out, for the stacked LSTM models on CPU.
//
// Why: LibTorch's CPU LSTM records about a dozen autograd operations per frame on a [B, 4H] gate
// tensor; at the sizes speech separation trains with (B = 16, H = 200) their dispatch costs about
// as much as the arithmetic. Here each frame is one matrix product plus one loop over the gates,
// the backward pass is written out (one product per frame, the weight gradient in one product at
// the end), and the two directions of a bidirectional layer run on two threads at once.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace nabu {
namespace fused_lstm {

// One LSTM layer on time-major input x [T, B, F] with sequence lengths [B] (int64, on the CPU).
// `weights` holds, per direction, {w_ih [4H, F], w_hh [4H, H], b_ih [4H], b_hh [4H]}: 4 tensors
// for one direction, 8 for two (forward then backward, as LibTorch's all_weights()). The backward
// direction of sequence b runs from frame lengths[b] - 1 to 0, starting from a zero state; both
// directions output zeros at frames at or past a sequence's length. Returns [T, B, directions*H].
// Differentiable with respect to x and all weights. Under an AutocastScope of bf16 on the CPU
// (mixed_precision.h) with float weights, the products (input projections, recurrence and their
// gradients) compute in bf16; states, gates and everything else stay float.
at::Tensor layer(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                 const at::Tensor& lengths);

// Whether layer() handles this input: on the CPU, any floating type (it is computed in the
// weights' type, float or double, with LibTorch's autocast off inside the layer).
bool supports(const at::Tensor& x);

}  // namespace fused_lstm
}  // namespace nabu
