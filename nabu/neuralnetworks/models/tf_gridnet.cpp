// tf_gridnet (Wang et al. 2023, docs/models.md): the mixture's STFT (real and imaginary parts as
// two channels) through a 3x3 convolution to D channels per time-frequency bin, GridNet blocks
// (tf_gridnet.h), a 3x3 transposed convolution to the real and imaginary parts of each speaker's
// spectrum, and the inverse STFT by weighted overlap-add: waveform [B, N, 1] -> [B, N, S], like
// the time-domain models, so that pit_sisnr trains it, `reconstruct_type = waveform` writes its
// outputs and `nabu separate` runs it.
#include "nabu/neuralnetworks/models/tf_gridnet.h"

#include <cmath>
#include <limits>
#include <map>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/neuralnetworks/models/recurrent.h"
#include "nabu/neuralnetworks/models/waveform_mask_model.h"
#include "nabu/neuralnetworks/tensor_map.h"

namespace nabu {
namespace tf_gridnet {

namespace F = torch::nn::functional;

torch::Tensor channel_norm(const torch::Tensor& x, const torch::Tensor& gain,
                           const torch::Tensor& bias, double epsilon) {
  auto mean = x.mean(1, /*keepdim=*/true);
  auto variance = (x - mean).pow(2).mean(1, /*keepdim=*/true);
  return (x - mean) * torch::rsqrt(variance + epsilon) * gain + bias;
}

namespace {

// Uniform in ±1/sqrt(fan_in), LibTorch's default for convolutions and linear layers.
torch::Tensor uniform_init(std::vector<int64_t> shape, int64_t fan_in) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return torch::empty(shape).uniform_(-bound, bound);
}

}  // namespace

GridNetBlockImpl::GridNetBlockImpl(const BlockSizes& sizes) : sizes_(sizes) {
  intra_ = make_path("intra_");
  inter_ = make_path("inter_");
  const int64_t per_head_value = sizes_.channels / sizes_.heads;
  query_ = make_projection("query", sizes_.heads, sizes_.qk_channels);
  key_ = make_projection("key", sizes_.heads, sizes_.qk_channels);
  value_ = make_projection("value", sizes_.heads, per_head_value);
  output_ = make_projection("output", 1, sizes_.channels);
}

GridPath GridNetBlockImpl::make_path(const std::string& prefix) {
  const auto& s = sizes_;
  GridPath path;
  path.norm_gain = register_parameter(prefix + "norm_gain", torch::ones({1, s.channels, 1, 1}));
  path.norm_bias = register_parameter(prefix + "norm_bias", torch::zeros({1, s.channels, 1, 1}));
  path.lstm = register_module(
      prefix + "lstm", torch::nn::LSTM(torch::nn::LSTMOptions(s.channels * s.kernel, s.hidden)
                                           .batch_first(true)
                                           .bidirectional(true)));
  path.projection = register_module(
      prefix + "projection",
      torch::nn::ConvTranspose1d(
          torch::nn::ConvTranspose1dOptions(2 * s.hidden, s.channels, s.kernel).stride(s.stride)));
  return path;
}

GridNetBlockImpl::HeadProjection GridNetBlockImpl::make_projection(const std::string& name,
                                                                   int64_t heads,
                                                                   int64_t per_head) {
  const int64_t channels = sizes_.channels, out = heads * per_head;
  HeadProjection p;
  p.weight = register_parameter(name + "_weight", uniform_init({out, channels}, channels));
  p.bias = register_parameter(name + "_bias", uniform_init({out}, channels));
  p.slope = register_parameter(name + "_slope", torch::full({heads}, 0.25));
  p.gain = register_parameter(name + "_norm_gain", torch::ones({heads, per_head, sizes_.bins}));
  p.norm_bias =
      register_parameter(name + "_norm_bias", torch::zeros({heads, per_head, sizes_.bins}));
  return p;
}

int64_t GridNetBlockImpl::padded_steps(int64_t steps) const {
  const int64_t kernel = sizes_.kernel, stride = sizes_.stride;
  if (steps <= kernel) return kernel;
  return (steps - kernel + stride - 1) / stride * stride + kernel;
}

int64_t GridNetBlockImpl::positions(int64_t steps) const {
  return (padded_steps(steps) - sizes_.kernel) / sizes_.stride + 1;
}

torch::Tensor GridNetBlockImpl::project(const HeadProjection& p, const torch::Tensor& x) const {
  const int64_t batch = x.size(0), frames = x.size(2), bins = x.size(3);
  const int64_t heads = p.slope.size(0), per_head = p.gain.size(1);
  auto y = torch::matmul(p.weight, x.reshape({batch, x.size(1), frames * bins})) +
           p.bias.view({1, -1, 1});
  y = y.view({batch, heads, per_head, frames, bins});
  y = torch::where(y >= 0, y, y * p.slope.view({1, heads, 1, 1, 1}));
  // Statistics over the channels and bins of each frame of each head.
  auto mean = y.mean({2, 4}, /*keepdim=*/true);
  auto variance = (y - mean).pow(2).mean({2, 4}, /*keepdim=*/true);
  return (y - mean) * torch::rsqrt(variance + sizes_.epsilon) *
             p.gain.view({1, heads, per_head, 1, bins}) +
         p.norm_bias.view({1, heads, per_head, 1, bins});
}

torch::Tensor GridNetBlockImpl::run_path(GridPath& path, const torch::Tensor& sequences,
                                         const torch::Tensor& positions, bool training) {
  const int64_t count = sequences.size(0), channels = sequences.size(1);
  const int64_t steps = sequences.size(2), padded = padded_steps(steps);
  auto unfolded = F::pad(sequences, F::PadFuncOptions({0, padded - steps}))
                      .unfold(2, sizes_.kernel, sizes_.stride)  // [N, D, P, I]
                      .permute({0, 2, 1, 3});
  const int64_t count_positions = unfolded.size(1);
  auto inputs = unfolded.reshape({count, count_positions, channels * sizes_.kernel});
  auto lengths = positions.defined()
                     ? positions
                     : torch::full({count}, count_positions, torch::TensorOptions(torch::kLong));
  auto hidden = recurrent::bidirectional_lstm(*path.lstm, inputs, lengths, training);
  return path.projection->forward(hidden.transpose(1, 2).to(sequences.scalar_type()))
      .narrow(2, 0, steps);
}

torch::Tensor GridNetBlockImpl::attention(const torch::Tensor& x, const torch::Tensor& key_mask) {
  const int64_t batch = x.size(0), channels = x.size(1), frames = x.size(2), bins = x.size(3);
  const int64_t heads = sizes_.heads;
  // [B, L, C, T, Q] -> [B, L, T, C Q]: each frame of each head one vector.
  const auto per_frame = [&](const torch::Tensor& y) {
    return y.permute({0, 1, 3, 2, 4}).reshape({batch, heads, frames, -1});
  };
  auto queries = per_frame(project(query_, x));
  auto keys = per_frame(project(key_, x));
  auto values = per_frame(project(value_, x));
  auto scores = torch::matmul(queries, keys.transpose(2, 3)) /
                std::sqrt(static_cast<double>(queries.size(3)));  // [B, L, T, T]
  if (key_mask.defined())
    scores = scores.masked_fill(key_mask.eq(0), -std::numeric_limits<float>::infinity());
  auto mixed = torch::matmul(torch::softmax(scores, 3), values);  // [B, L, T, D/L Q]
  auto merged = mixed.view({batch, heads, frames, channels / heads, bins})
                    .permute({0, 1, 3, 2, 4})
                    .reshape({batch, channels, frames, bins});
  return project(output_, merged).squeeze(1);
}

torch::Tensor GridNetBlockImpl::forward(const torch::Tensor& input,
                                        const torch::Tensor& frame_lengths, bool training) {
  const int64_t batch = input.size(0), channels = input.size(1);
  const int64_t frames = input.size(2), bins = input.size(3);
  auto lengths = frame_lengths.to(torch::kLong).cpu();
  torch::Tensor mask, key_mask;  // undefined when every utterance fills the batch
  if (lengths.lt(frames).any().item<bool>()) {
    auto real = frame_mask(lengths, frames, input.scalar_type()).to(input.device());  // [B, T]
    mask = real.view({batch, 1, frames, 1});
    key_mask = real.view({batch, 1, 1, frames});
  }

  // Sub-band: each frame's bins as a sequence.
  auto y = waveform::masked(
      channel_norm(input, intra_.norm_gain, intra_.norm_bias, sizes_.epsilon), mask);
  auto out = run_path(intra_, y.permute({0, 2, 1, 3}).reshape({batch * frames, channels, bins}),
                      torch::Tensor(), training);
  auto x = input + waveform::masked(
                       out.view({batch, frames, channels, bins}).permute({0, 2, 1, 3}), mask);

  // Temporal: each bin's frames as a sequence, to each utterance's own positions.
  y = waveform::masked(channel_norm(x, inter_.norm_gain, inter_.norm_bias, sizes_.epsilon), mask);
  auto positions = torch::empty({batch}, torch::kLong);
  for (int64_t b = 0; b < batch; ++b) positions[b] = this->positions(lengths[b].item<int64_t>());
  out = run_path(inter_, y.permute({0, 3, 1, 2}).reshape({batch * bins, channels, frames}),
                 positions.repeat_interleave(bins), training);
  x = x + waveform::masked(out.view({batch, bins, channels, frames}).permute({0, 2, 3, 1}),
                           mask);

  // Full-band: frames against frames.
  return x + waveform::masked(attention(x, key_mask), mask);
}

}  // namespace tf_gridnet

namespace {

namespace F = torch::nn::functional;
using tf_gridnet::BlockSizes;
using tf_gridnet::GridNetBlock;

class TfGridNetModel : public Model {
 public:
  TfGridNetModel(const std::string& name, const std::string& where, TfGridNetOptions options)
      : Model(name, "tf_gridnet", options.trainable, where), options_(std::move(options)) {}

  const TfGridNetOptions& options() const { return options_; }

 protected:
  void build(const std::vector<torch::Tensor>& inputs) override {
    expect_inputs(inputs, 1, 1);
    waveform::waveform_input(*this, inputs[0]);
    const auto& o = options_;
    const int64_t channels = o.embedding_channels;
    input_conv_ = register_module(
        "input_conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, channels, 3).padding(1)));
    input_gain_ = register_parameter("input_norm_gain", torch::ones({1, channels, 1, 1}));
    input_bias_ = register_parameter("input_norm_bias", torch::zeros({1, channels, 1, 1}));
    for (int b = 0; b < o.num_blocks; ++b)
      blocks_.push_back(
          register_module("block" + std::to_string(b), GridNetBlock(o.block_sizes())));
    output_conv_ = register_module(
        "output_conv",
        torch::nn::ConvTranspose2d(
            torch::nn::ConvTranspose2dOptions(channels, 2 * int64_t{o.num_speakers}, 3).padding(1)));
    auto periodic = torch::hann_window(o.window_length, torch::TensorOptions(torch::kDouble));
    window_ = register_buffer(
        "window", (o.window == StftWindow::kSqrtHann ? periodic.sqrt() : periodic).to(torch::kFloat));
    to(inputs[0].device());
  }

  torch::Tensor forward_impl(const std::vector<torch::Tensor>& inputs,
                             const torch::Tensor& seq_lengths, bool training) override {
    expect_inputs(inputs, 1, 1);
    const auto& o = options_;
    // The FFTs want float, whatever autocast gives.
    auto signal = waveform::waveform_input(*this, inputs[0]).to(torch::kFloat);
    const int64_t batch = signal.size(0), samples = signal.size(1);
    const int64_t length = o.window_length, shift = o.window_shift, pad = length - shift;
    auto sample_lengths = seq_lengths.to(torch::kLong).cpu();
    // Frames whose start (in the signal padded by window_length - window_shift in front) is at or
    // before the last sample: every sample lies under window_length / window_shift frames.
    auto frame_lengths = ((sample_lengths - 1).clamp_min(0) + pad).div(shift, "floor") + 1;
    const int64_t frames = ((std::max<int64_t>(samples, 1) - 1) + pad) / shift + 1;
    const int64_t total = (frames - 1) * shift + length;
    torch::Tensor sample_mask, mask;
    if (sample_lengths.lt(samples).any().item<bool>()) {
      sample_mask = frame_mask(sample_lengths, samples).to(signal.device());
      signal = signal * sample_mask;
      mask = frame_mask(frame_lengths, frames).to(signal.device()).view({batch, 1, frames, 1});
    }
    // Each utterance scaled by its own standard deviation (over its real samples), as the paper.
    auto counts = sample_lengths.clamp_min(1).to(signal.options()).view({batch, 1});
    auto mean = signal.sum(1, /*keepdim=*/true) / counts;
    auto centred = signal - mean;
    if (sample_mask.defined()) centred = centred * sample_mask;
    auto scale = (centred.pow(2).sum(1, /*keepdim=*/true) / counts).sqrt().clamp_min(1e-8);
    auto padded = F::pad(signal / scale, F::PadFuncOptions({pad, total - samples - pad}));
    auto spectrum = torch::fft::rfft(padded.unfold(1, length, shift) * window_, length, -1);
    auto x =
        waveform::masked(torch::stack({torch::real(spectrum), torch::imag(spectrum)}, 1), mask);
    x = waveform::masked(
        tf_gridnet::channel_norm(input_conv_->forward(x), input_gain_, input_bias_, 1e-5), mask);
    for (auto& block : blocks_) x = block->forward(x, frame_lengths, training);
    auto parts = waveform::masked(output_conv_->forward(x), mask).to(torch::kFloat).view(
        {batch, o.num_speakers, 2, frames, o.window_length / 2 + 1});
    auto speakers = torch::complex(parts.select(2, 0), parts.select(2, 1));
    auto time_frames = torch::fft::irfft(speakers, length, -1) * window_;  // [B, S, T, L]
    const auto overlap_add = [&](const torch::Tensor& columns, int64_t count) {
      return F::fold(columns, F::FoldFuncOptions({1, total}, {1, length}).stride({1, shift}))
          .reshape({count, -1, total});
    };
    auto signals = overlap_add(
        time_frames.reshape({batch * o.num_speakers, frames, length}).transpose(1, 2),
        batch);  // [B, S, total]
    auto real_frames = mask.defined() ? mask.view({batch, 1, frames})
                                      : torch::ones({batch, 1, frames}, signals.options());
    auto window_power = overlap_add(window_.square().view({1, length, 1}) * real_frames, batch);
    signals = signals / window_power.clamp_min(1e-8);
    auto out = (signals.narrow(2, pad, samples) * scale.view({batch, 1, 1})).transpose(1, 2);
    return sample_mask.defined() ? out * sample_mask.unsqueeze(2) : out;
  }

 private:
  TfGridNetOptions options_;
  torch::nn::Conv2d input_conv_{nullptr};
  torch::Tensor input_gain_, input_bias_, window_;
  std::vector<GridNetBlock> blocks_;
  torch::nn::ConvTranspose2d output_conv_{nullptr};
};

}  // namespace

const TfGridNetOptions* tf_gridnet_options(const Model& model) {
  const auto* gridnet = dynamic_cast<const TfGridNetModel*>(&model);
  return gridnet ? &gridnet->options() : nullptr;
}

NABU_REGISTER_WITH_OPTIONS(model_registry, "tf_gridnet",
                           (make_model<TfGridNetModel, TfGridNetOptions>), TfGridNetOptions,
                           "TF-GridNet: STFT, sub-band and temporal BLSTMs over unfolded bins and "
                           "frames, full-band self-attention, one complex spectrum per speaker, "
                           "inverse STFT; waveform [B,N,1] -> [B,N,S]")

}  // namespace nabu
