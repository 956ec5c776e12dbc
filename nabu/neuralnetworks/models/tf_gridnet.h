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
#include <string>

#include "nabu/neuralnetworks/models/model.h"

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

namespace nabu {

// The model's options (tf_gridnet.cpp), here so that export/ can write a built model's forward
// pass from them and its parameters (export/model_writers.h).
enum class StftWindow { kHann, kSqrtHann };

struct TfGridNetOptions {
  std::string architecture;
  bool trainable = true;
  int num_speakers = 2;
  int window_length = 256;
  int window_shift = 64;
  StftWindow window = StftWindow::kSqrtHann;
  int embedding_channels = 128;
  int unfold_kernel = 4;
  int unfold_stride = 1;
  int hidden_units = 192;
  int attention_heads = 4;
  int attention_qk_dim = 512;
  int num_blocks = 6;

  void declare(OptionsReader& r) {
    declare_common(r, architecture, trainable);
    r("num_speakers", num_speakers, "number of separated waveforms (S)");
    r("window_length", window_length,
      "STFT window and FFT size in samples (256 = 32 ms at 8 kHz; F = window_length/2 + 1 bins)");
    r("window_shift", window_shift, "STFT hop in samples (64 = 8 ms at 8 kHz)");
    r.choice("window", window, {{"sqrt_hann", StftWindow::kSqrtHann}, {"hann", StftWindow::kHann}},
             "STFT analysis and synthesis window (periodic)");
    r("embedding_channels", embedding_channels, "channels D of every time-frequency bin");
    r("unfold_kernel", unfold_kernel, "neighbouring bins or frames I in one BLSTM input");
    r("unfold_stride", unfold_stride, "step J between unfolded positions");
    r("hidden_units", hidden_units, "units H of each direction of every BLSTM");
    r("attention_heads", attention_heads, "self-attention heads L (embedding_channels must be a "
                                          "multiple)");
    r("attention_qk_dim", attention_qk_dim,
      "query/key size per frame and head; E = ceil(attention_qk_dim / F) channels per bin");
    r("num_blocks", num_blocks, "GridNet blocks B");
    r.require(num_speakers >= 1, "num_speakers", "must be >= 1");
    r.require(window_length >= 2 && window_length % 2 == 0, "window_length",
              "must be even and >= 2");
    r.require(window_shift >= 1 && window_shift <= window_length / 2, "window_shift",
              "must be between 1 and window_length/2 (the inverse STFT needs the frames to "
              "overlap)");
    r.require(embedding_channels >= 1, "embedding_channels", "must be >= 1");
    r.require(unfold_kernel >= 1, "unfold_kernel", "must be >= 1");
    r.require(unfold_stride >= 1 && unfold_stride <= unfold_kernel, "unfold_stride",
              "must be between 1 and unfold_kernel");
    r.require(hidden_units >= 1, "hidden_units", "must be >= 1");
    r.require(attention_heads >= 1 && embedding_channels % attention_heads == 0,
              "attention_heads", "must be >= 1 and divide embedding_channels");
    r.require(attention_qk_dim >= 1, "attention_qk_dim", "must be >= 1");
    r.require(num_blocks >= 1, "num_blocks", "must be >= 1");
  }

  int64_t bins() const { return window_length / 2 + 1; }
  tf_gridnet::BlockSizes block_sizes() const {
    tf_gridnet::BlockSizes s;
    s.channels = embedding_channels;
    s.kernel = unfold_kernel;
    s.stride = unfold_stride;
    s.hidden = hidden_units;
    s.heads = attention_heads;
    s.bins = bins();
    s.qk_channels = (attention_qk_dim + s.bins - 1) / s.bins;
    return s;
  }
};

// A built model's options, or null when `model` is not a tf_gridnet.
const TfGridNetOptions* tf_gridnet_options(const Model& model);

}  // namespace nabu
