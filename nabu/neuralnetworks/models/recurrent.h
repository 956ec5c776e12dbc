// Building blocks of the recurrent models: the LSTM cell family of the original
// (components/rnn_cell.py: LayerNormBasicLSTMCell, the leaky cells, the state-reset cells) as one
// time-loop over precomputed input projections, and helpers that make every direction respect
// sequence lengths (a padded batch gives the same outputs on real frames as each utterance alone,
// and zeros on padded frames).
#pragma once

#include <torch/torch.h>

#include <array>

#include <vector>

#include "nabu/neuralnetworks/models/model.h"

namespace nabu::recurrent {

// x [B, T, ...]: the first lengths[b] frames of each sequence reversed, padded frames in place
// (tf.reverse_sequence). Applying it twice gives x back.
torch::Tensor reverse_padded(const torch::Tensor& x, const torch::Tensor& lengths);
// x [B, T, ...] with the frames at t >= lengths[b] set to zero.
torch::Tensor zero_padding(const torch::Tensor& x, const torch::Tensor& lengths);
// Lengths as int64 on x's device, checked against B and T (throws Error naming `who`).
torch::Tensor checked_lengths(const torch::Tensor& lengths, const torch::Tensor& x,
                              const std::string& who);

// Which gate pre-activations see the previous output h (rnn_cell.py):
//   kFull               LayerNormBasicLSTMCell / LayerNormBasicLeakLSTMCell: all four gates;
//   kForgetOutputOnly   LayerNormIZNotRecLeakLSTMCell: input gate and candidate from x only;
//   kNone               LayerNormNotRecLeakLSTMCell: no gate sees h (only the cell state recurs).
enum class LstmRecurrence { kFull, kForgetOutputOnly, kNone };

struct LstmCellOptions {
  int64_t units = 0;
  LstmRecurrence recurrence = LstmRecurrence::kFull;
  bool layer_norm = false;
  double recurrent_keep = 1.0;  // keep probability of the candidate g, training only
  Activation activation = Activation::kTanh;
  double leak_factor = 1.0;  // the state carried to the next step is c * leak_factor
};

// The state replicas of the reset LSTM (LayerNormResetLSTMCell, LayerNormGroupResetLSTMCell):
// replicas = t_reset / group_size copies of the state run side by side; at the last frame of
// every group of `group_size` frames one replica is zeroed before the step, and the output at
// frame t is the replica with the longest memory, the next one to be reset.
struct ResetSchedule {
  int64_t t_reset = 0;  // 0: a plain cell without replicas
  int64_t group_size = 1;
  bool active() const { return t_reset > 0; }
  int64_t replicas() const { return t_reset / group_size; }
  bool resets_at(int64_t t) const { return t % group_size + 1 == group_size; }
  int64_t reset_replica(int64_t t) const { return (t / group_size) % replicas(); }
  int64_t output_replica(int64_t t) const { return ((t + 1) / group_size) % replicas(); }
};

struct ScanOutput {
  torch::Tensor hidden;    // [B, T, U]
  torch::Tensor replicas;  // [B, T, K, U] when the schedule is active, else undefined
};

// One LSTM direction. Parameters (gate order i, j, f, o as in TensorFlow):
//   kernel_x [D, 4U], kernel_h [U, 4U] (kFull) or [U, 2U] for f, o (kForgetOutputOnly),
//   bias [4U] without layer norm, else ln_{input,transform,forget,output,state}_{gamma,beta}.
// A constant forget bias of 1.0 is added as in TensorFlow's cells.
class LstmCellImpl : public torch::nn::Module {
 public:
  LstmCellImpl(int64_t input_size, const LstmCellOptions& options, const torch::Device& device);

  // x: [B, T, D] for a plain cell, [B, T, R, D] with R = 1 (shared by all replicas) or
  // R = replicas for a reset cell; frames in processing order. Padded frames are processed too
  // (they come after the real ones, so they never reach them); the caller zeroes them.
  ScanOutput scan(const torch::Tensor& x, const ResetSchedule& schedule, bool training);

  const LstmCellOptions& options() const { return options_; }

 private:
  torch::Tensor norm(const torch::Tensor& x, int which) const;
  ScanOutput scan_without_recurrence(const torch::Tensor& projected, bool training);
  // The gate pre-activations (i, j, f, o) of one step from its projected input `z` and the
  // previous output `h`, by the recurrence kind, layer-normalised with layer_norm.
  std::array<torch::Tensor, 4> step_gates(const torch::Tensor& z, const torch::Tensor& h);

  LstmCellOptions options_;
  torch::Tensor kernel_x_, kernel_h_, bias_;
  std::vector<torch::Tensor> gammas_, betas_;  // input, transform, forget, output, state
};
TORCH_MODULE(LstmCell);

// Runs `cell` over x [B, T, ...] in time order, or (reverse) over each sequence reversed within
// its length, the result put back in time order; padded frames of the result are zero.
ScanOutput run_direction(LstmCellImpl& cell, const torch::Tensor& x, const torch::Tensor& lengths,
                         bool reverse, const ResetSchedule& schedule, bool training);

// A bidirectional LibTorch LSTM layer (batch_first) on x [B, T, F] that respects sequence
// lengths: fused_lstm.h on the CPU; elsewhere LibTorch's kernel forward and on each sequence
// reversed within its length. Padded frames of the result [B, T, 2H] are zero.
torch::Tensor bidirectional_lstm(torch::nn::LSTMImpl& layer, const torch::Tensor& x,
                                 const torch::Tensor& lengths, bool training);
// The same with LibTorch's LSTM kernel on any device (cuDNN on a GPU): what bidirectional_lstm
// does where the fused layer does not apply.
torch::Tensor libtorch_bidirectional_lstm(torch::nn::LSTMImpl& layer, const torch::Tensor& x,
                                          const torch::Tensor& lengths, bool training);

}  // namespace nabu::recurrent
