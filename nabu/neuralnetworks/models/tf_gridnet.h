// tf_gridnet (Wang, Cornell, Choi, Lee, Kim & Watanabe 2023, docs/models.md): separation in the
// complex STFT domain by blocks that model each frame's spectrum across frequency (sub-band BLSTM
// over unfolded neighbouring bins), each bin across time (BLSTM over unfolded neighbouring
// frames) and whole frames against each other (full-band multi-head self-attention).
//
// The block is declared here so that tests can run it against a written-out reference
// (tests/unit/test_tf_gridnet.cpp); the model around it (STFT in, one complex spectrum per
// speaker out, inverse STFT) is in tf_gridnet.cpp.
//
// Padding-safe like the other models: x is zero at every frame t >= frame_lengths[b], the
// temporal BLSTM runs to each utterance's own number of unfolded positions and the attention's
// keys are each utterance's real frames, so a padded batch gives each utterance what it gives
// alone, and zeros past its length.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace nabu::tf_gridnet {

struct BlockSizes {
  int64_t channels = 128;    // D: embedding channels of every time-frequency bin
  int64_t kernel = 4;        // I: neighbouring bins (or frames) unfolded into one BLSTM input
  int64_t stride = 1;        // J: step between unfolded positions
  int64_t hidden = 192;      // H: units of each direction of the BLSTMs
  int64_t heads = 4;         // L: attention heads (channels must be a multiple)
  int64_t qk_channels = 4;   // E: query/key channels per bin of each head
  int64_t bins = 129;        // Q: frequency bins
  double epsilon = 1e-5;     // of the layer norms
};

// One unfolded BLSTM path: layer norm over the channels of each bin, the sequence unfolded by
// `kernel` every `stride`, a BLSTM, and a transposed convolution back to one vector per bin.
struct GridPath {
  torch::Tensor norm_gain, norm_bias;  // [1, D, 1, 1]
  torch::nn::LSTM lstm{nullptr};
  torch::nn::ConvTranspose1d projection{nullptr};
};

class GridNetBlockImpl : public torch::nn::Module {
 public:
  explicit GridNetBlockImpl(const BlockSizes& sizes);

  // x [B, D, T, Q] (zero at frames t >= frame_lengths[b]); frame_lengths int64 [B]. Returns
  // [B, D, T, Q], zero at those frames.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& frame_lengths, bool training);

  const BlockSizes& sizes() const { return sizes_; }

  // Number of padded steps a sequence of `steps` is unfolded from, and the unfolded positions
  // of an utterance of `steps` real ones (at least one).
  int64_t padded_steps(int64_t steps) const;
  int64_t positions(int64_t steps) const;

 private:
  GridPath make_path(const std::string& prefix);
  // [N, D, steps] -> [N, D, steps]: unfold, BLSTM to each sequence's `positions` (undefined:
  // all), transposed convolution.
  torch::Tensor run_path(GridPath& path, const torch::Tensor& sequences,
                         const torch::Tensor& positions, bool training);
  // x [B, D, T, Q] -> the attention's output [B, D, T, Q]; key_mask [B, 1, 1, T] (undefined:
  // every frame is real).
  torch::Tensor attention(const torch::Tensor& x, const torch::Tensor& key_mask);

  // 1x1 convolution to heads * per_head channels, a PReLU per head and a layer norm over the
  // channels and bins of each frame of each head: [B, D, T, Q] -> [B, heads, per_head, T, Q].
  struct HeadProjection {
    torch::Tensor weight, bias;       // [heads * per_head, D], [heads * per_head]
    torch::Tensor slope;              // [heads]
    torch::Tensor gain, norm_bias;    // [heads, per_head, Q]
  };
  HeadProjection make_projection(const std::string& name, int64_t heads, int64_t per_head);
  torch::Tensor project(const HeadProjection& p, const torch::Tensor& x) const;

  BlockSizes sizes_;
  GridPath intra_, inter_;
  HeadProjection query_, key_, value_, output_;
};
TORCH_MODULE(GridNetBlock);

// Layer norm of x [B, D, T, Q] over its channels (dim 1), per bin, with gain and bias [1, D, 1, 1].
torch::Tensor channel_norm(const torch::Tensor& x, const torch::Tensor& gain,
                           const torch::Tensor& bias, double epsilon);

}  // namespace nabu::tf_gridnet
