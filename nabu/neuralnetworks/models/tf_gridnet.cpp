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
#include "nabu/core/onnx.h"
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
  BlockSizes block_sizes() const {
    BlockSizes s;
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

class TfGridNetModel : public Model {
 public:
  TfGridNetModel(const std::string& name, const std::string& where, TfGridNetOptions options)
      : Model(name, "tf_gridnet", options.trainable, where), options_(std::move(options)) {}

  std::string torchscript() const override;
  std::string onnx(onnx::Graph& graph, const std::string& waveform) const override;

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

namespace gridnet_onnx {

using onnx::Graph;
using onnx::int_attribute;
using onnx::ints_attribute;

// The model's parameters by name, as ONNX initializers.
struct Parameters {
  Graph& graph;
  std::map<std::string, torch::Tensor> values;
  std::string operator()(const std::string& name) const { return onnx_floats(graph, name, at(name)); }
  const torch::Tensor& at(const std::string& name) const {
    auto found = values.find(name);
    if (found == values.end()) throw Error("tf_gridnet: no parameter " + name + " to export");
    return found->second;
  }
};

// x [B, D, T, F] normalised over its channels with gain and bias [1, D, 1, 1].
std::string channel_norm(Graph& g, const Parameters& p, const std::string& x,
                         const std::string& prefix) {
  auto mean = g.node("ReduceMean", {x}, {ints_attribute("axes", {1})});
  auto centred = g.node("Sub", {x, mean});
  auto variance = g.node("ReduceMean", {g.node("Mul", {centred, centred})}, {ints_attribute("axes", {1})});
  auto scale = g.node("Reciprocal", {g.node("Sqrt", {g.node("Add", {variance, g.scalar(1e-5F)})})});
  return g.node("Add", {g.node("Mul", {g.node("Mul", {centred, scale}), p(prefix + "gain")}),
                        p(prefix + "bias")});
}

// sequences [N, D, steps] -> [N, D, steps]: unfolded by I every J (zeros past the end), the BLSTM
// over every position, the transposed convolution back (GridNetBlockImpl::run_path).
std::string path(Graph& g, const Parameters& p, const BlockSizes& s, const std::string& sequences,
                 const std::string& prefix) {
  auto steps = g.node("Gather", {g.node("Shape", {sequences}), g.int_scalar(2)});
  auto beyond = g.node("Max", {g.node("Sub", {steps, g.int_scalar(s.kernel)}), g.int_scalar(0)});
  auto padded = g.node("Add", {g.node("Mul", {g.node("Div", {g.node("Add", {beyond, g.int_scalar(s.stride - 1)}), g.int_scalar(s.stride)}),
                                              g.int_scalar(s.stride)}),
                               g.int_scalar(s.kernel)});
  auto positions = g.node("Add", {g.node("Div", {g.node("Sub", {padded, g.int_scalar(s.kernel)}), g.int_scalar(s.stride)}),
                                  g.int_scalar(1)});
  auto pads = g.node("Concat", {g.ints({0, 0, 0, 0, 0}), g.node("Reshape", {g.node("Sub", {padded, steps}), g.ints({1})})},
                     {int_attribute("axis", 0)});
  std::vector<int64_t> offsets(static_cast<std::size_t>(s.kernel));
  for (int64_t i = 0; i < s.kernel; ++i) offsets[static_cast<std::size_t>(i)] = i;
  auto index = g.node("Add", {g.node("Unsqueeze", {g.node("Mul", {g.node("Range", {g.int_scalar(0), positions, g.int_scalar(1)}), g.int_scalar(s.stride)}),
                                                   g.ints({1})}),
                              g.int64s("offsets", {1, s.kernel}, offsets)});
  auto unfolded = g.node("Gather", {g.node("Pad", {sequences, pads}), index}, {int_attribute("axis", 2)});  // [N, D, P, I]
  auto inputs = g.node("Reshape", {g.node("Transpose", {unfolded}, {ints_attribute("perm", {2, 0, 1, 3})}),
                                   g.ints({0, 0, s.channels * s.kernel})});  // [P, N, D I]
  std::vector<torch::Tensor> weights;
  for (const char* name : {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse",
                           "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse"})
    weights.push_back(p.at(prefix + "lstm." + name));
  auto hidden = onnx_recurrent_layer(g, "LSTM", inputs, weights, s.hidden, true, prefix + "lstm_");
  auto out = g.node("ConvTranspose", {g.node("Transpose", {hidden}, {ints_attribute("perm", {1, 2, 0})}),
                                      p(prefix + "projection.weight"), p(prefix + "projection.bias")},
                    {ints_attribute("strides", {s.stride})});
  return g.node("Slice", {out, g.ints({0}), g.node("Reshape", {steps, g.ints({1})}), g.ints({2})});
}

// 1x1 convolution, PReLU per head, norm over channels and bins of each frame: [B, D, T, F] ->
// [B, heads, per_head, T, F] (GridNetBlockImpl::project).
std::string project(Graph& g, const Parameters& p, const BlockSizes& s, const std::string& x,
                    const std::string& frames, const std::string& name) {
  const auto& slope = p.at(name + "_slope");
  const auto& gain = p.at(name + "_norm_gain");
  const int64_t heads = slope.size(0), per_head = gain.size(1);
  auto y = g.node("Add", {g.node("MatMul", {p(name + "_weight"), g.node("Reshape", {x, g.ints({0, s.channels, -1})})}),
                          onnx_floats(g, name + "_bias", p.at(name + "_bias").view({-1, 1}))});
  y = g.node("Reshape", {y, g.node("Concat", {g.ints({0, heads, per_head}), frames, g.ints({s.bins})}, {int_attribute("axis", 0)})});
  y = g.node("PRelu", {y, onnx_floats(g, name + "_slope", slope.view({1, heads, 1, 1, 1}))});
  auto mean = g.node("ReduceMean", {y}, {ints_attribute("axes", {2, 4})});
  auto centred = g.node("Sub", {y, mean});
  auto variance = g.node("ReduceMean", {g.node("Mul", {centred, centred})}, {ints_attribute("axes", {2, 4})});
  auto scale = g.node("Reciprocal", {g.node("Sqrt", {g.node("Add", {variance, g.scalar(1e-5F)})})});
  return g.node("Add", {g.node("Mul", {g.node("Mul", {centred, scale}),
                                       onnx_floats(g, name + "_norm_gain", gain.view({1, heads, per_head, 1, s.bins}))}),
                        onnx_floats(g, name + "_norm_bias", p.at(name + "_norm_bias").view({1, heads, per_head, 1, s.bins}))});
}

// One GridNet block on x [B, D, T, F] (GridNetBlockImpl::forward without padding).
std::string block(Graph& g, const Parameters& p, const BlockSizes& s, std::string x,
                  const std::string& frames, const std::string& prefix) {
  const auto concat = [&](const std::vector<std::string>& parts) {
    return g.node("Concat", parts, {int_attribute("axis", 0)});
  };
  auto y = channel_norm(g, p, x, prefix + "intra_norm_");
  auto out = path(g, p, s, g.node("Reshape", {g.node("Transpose", {y}, {ints_attribute("perm", {0, 2, 1, 3})}), g.ints({-1, s.channels, s.bins})}),
                  prefix + "intra_");
  out = g.node("Reshape", {out, concat({g.ints({-1}), frames, g.ints({s.channels, s.bins})})});
  x = g.node("Add", {x, g.node("Transpose", {out}, {ints_attribute("perm", {0, 2, 1, 3})})});
  y = channel_norm(g, p, x, prefix + "inter_norm_");
  out = path(g, p, s, g.node("Reshape", {g.node("Transpose", {y}, {ints_attribute("perm", {0, 3, 1, 2})}), concat({g.ints({-1, s.channels}), frames})}),
             prefix + "inter_");
  out = g.node("Reshape", {out, concat({g.ints({-1, s.bins, s.channels}), frames})});
  x = g.node("Add", {x, g.node("Transpose", {out}, {ints_attribute("perm", {0, 2, 3, 1})})});
  const auto per_frame = [&](const std::string& y5) {
    return g.node("Reshape", {g.node("Transpose", {y5}, {ints_attribute("perm", {0, 1, 3, 2, 4})}), g.ints({0, 0, 0, -1})});
  };
  auto queries = per_frame(project(g, p, s, x, frames, prefix + "query"));
  auto keys = per_frame(project(g, p, s, x, frames, prefix + "key"));
  auto values = per_frame(project(g, p, s, x, frames, prefix + "value"));
  auto scores = g.node("Div", {g.node("MatMul", {queries, g.node("Transpose", {keys}, {ints_attribute("perm", {0, 1, 3, 2})})}),
                               g.scalar(static_cast<float>(std::sqrt(static_cast<double>(s.qk_channels * s.bins))))});
  auto mixed = g.node("MatMul", {g.node("Softmax", {scores}, {int_attribute("axis", 3)}), values});
  auto merged = g.node("Reshape", {mixed, concat({g.ints({0, s.heads}), frames, g.ints({s.channels / s.heads, s.bins})})});
  merged = g.node("Reshape", {g.node("Transpose", {merged}, {ints_attribute("perm", {0, 1, 3, 2, 4})}),
                              concat({g.ints({0, s.channels}), frames, g.ints({s.bins})})});
  auto projected = g.node("Reshape", {project(g, p, s, merged, frames, prefix + "output"),
                                      concat({g.ints({0, s.channels}), frames, g.ints({s.bins})})});
  return g.node("Add", {x, projected});
}

}  // namespace gridnet_onnx

// The same as ONNX nodes on one unpadded batch: the STFT and its inverse as products with DFT
// matrices (the window in the frames, frames gathered by index), the overlap-add as a transposed
// convolution with an identity kernel, the BLSTMs as ONNX's LSTM.
std::string TfGridNetModel::onnx(onnx::Graph& g, const std::string& waveform) const {
  using onnx::int_attribute;
  using onnx::ints_attribute;
  const auto& o = options_;
  const auto sizes = o.block_sizes();
  const int64_t length = o.window_length, shift = o.window_shift, pad = length - shift;
  const int64_t bins = sizes.bins, speakers = o.num_speakers;
  gridnet_onnx::Parameters p{g, {}};
  for (const auto& item : named_parameters(/*recurse=*/true)) p.values[item.key()] = item.value();
  const auto concat = [&](const std::vector<std::string>& parts) {
    return g.node("Concat", parts, {int_attribute("axis", 0)});
  };
  auto mean = g.node("ReduceMean", {waveform}, {ints_attribute("axes", {1})});
  auto centred = g.node("Sub", {waveform, mean});
  auto scale = g.node("Max", {g.node("Sqrt", {g.node("ReduceMean", {g.node("Mul", {centred, centred})}, {ints_attribute("axes", {1})})}),
                              g.scalar(1e-8F)});  // [B, 1]
  auto samples = g.node("Gather", {g.node("Shape", {waveform}), g.int_scalar(1)});
  auto frames = g.node("Add", {g.node("Div", {g.node("Add", {g.node("Max", {samples, g.int_scalar(1)}), g.int_scalar(pad - 1)}), g.int_scalar(shift)}),
                               g.int_scalar(1)});
  auto total = g.node("Add", {g.node("Mul", {g.node("Sub", {frames, g.int_scalar(1)}), g.int_scalar(shift)}), g.int_scalar(length)});
  auto after = g.node("Sub", {g.node("Sub", {total, samples}), g.int_scalar(pad)});
  auto padded = g.node("Pad", {g.node("Div", {waveform, scale}), concat({g.ints({0, pad, 0}), g.node("Reshape", {after, g.ints({1})})})});
  std::vector<int64_t> offsets(static_cast<std::size_t>(length));
  for (int64_t n = 0; n < length; ++n) offsets[static_cast<std::size_t>(n)] = n;
  auto index = g.node("Add", {g.node("Unsqueeze", {g.node("Mul", {g.node("Range", {g.int_scalar(0), frames, g.int_scalar(1)}), g.int_scalar(shift)}), g.ints({1})}),
                              g.int64s("offsets", {1, length}, offsets)});
  auto window = window_.to(torch::kDouble);
  auto n = torch::arange(length, torch::kDouble), f = torch::arange(bins, torch::kDouble);
  auto angle = 2.0 * M_PI * f.view({-1, 1}) * n.view({1, -1}) / static_cast<double>(length);  // [F, L]
  // Analysis: X_f = sum_n w_n x_n e^{-i angle}; synthesis (irfft): x_n = sum_f c_f (Re X_f cos -
  // Im X_f sin) / L with c_f = 1 at DC and Nyquist, 2 elsewhere; times the window again.
  auto weights = torch::full({bins, 1}, 2.0, torch::kDouble);
  weights[0] = 1.0;
  weights[bins - 1] = 1.0;
  auto framed = g.node("Gather", {padded, index}, {int_attribute("axis", 1)});  // [B, T, L]
  auto real = g.node("MatMul", {framed, onnx_floats(g, "dft_cos", (torch::cos(angle) * window.view({1, -1})).t())});
  auto imag = g.node("MatMul", {framed, onnx_floats(g, "dft_sin", (-torch::sin(angle) * window.view({1, -1})).t())});
  auto x = g.node("Concat", {g.node("Unsqueeze", {real, g.ints({1})}), g.node("Unsqueeze", {imag, g.ints({1})})}, {int_attribute("axis", 1)});
  x = g.node("Conv", {x, p("input_conv.weight"), p("input_conv.bias")}, {ints_attribute("pads", {1, 1, 1, 1})});
  x = gridnet_onnx::channel_norm(g, p, x, "input_norm_");
  auto frames_1d = g.node("Reshape", {frames, g.ints({1})});
  for (int b = 0; b < o.num_blocks; ++b)
    x = gridnet_onnx::block(g, p, sizes, x, frames_1d, "block" + std::to_string(b) + ".");
  auto parts = g.node("Reshape", {g.node("ConvTranspose", {x, p("output_conv.weight"), p("output_conv.bias")}, {ints_attribute("pads", {1, 1, 1, 1})}),
                                  g.ints({0, speakers, 2, -1, bins})});
  auto synthesis_cos = onnx_floats(g, "idft_cos", torch::cos(angle) * weights / static_cast<double>(length) * window.view({1, -1}));
  auto synthesis_sin = onnx_floats(g, "idft_sin", -torch::sin(angle) * weights / static_cast<double>(length) * window.view({1, -1}));
  auto pieces = g.node("Add", {g.node("MatMul", {g.node("Gather", {parts, g.int_scalar(0)}, {int_attribute("axis", 2)}), synthesis_cos}),
                               g.node("MatMul", {g.node("Gather", {parts, g.int_scalar(1)}, {int_attribute("axis", 2)}), synthesis_sin})});  // [B, S, T, L]
  // Overlap-add: a transposed convolution whose kernel puts channel k at offset k.
  auto identity = onnx_floats(g, "overlap_add", torch::eye(length).view({length, 1, length}));
  const auto overlap_add = [&](const std::string& columns) {  // [N, L, T] -> [N, 1, total]
    return g.node("ConvTranspose", {columns, identity}, {ints_attribute("strides", {shift})});
  };
  auto columns = g.node("Transpose", {g.node("Reshape", {pieces, concat({g.ints({-1}), frames_1d, g.ints({length})})})},
                        {ints_attribute("perm", {0, 2, 1})});
  auto signals = overlap_add(columns);
  auto power = overlap_add(g.node("Expand", {onnx_floats(g, "window_power", window.square().view({1, length, 1})),
                                             concat({g.ints({1, length}), frames_1d})}));
  signals = g.node("Div", {signals, g.node("Max", {power, g.scalar(1e-8F)})});
  signals = g.node("Reshape", {signals, g.ints({-1, speakers, 0})});
  signals = g.node("Slice", {signals, g.ints({pad}), g.node("Reshape", {g.node("Add", {samples, g.int_scalar(pad)}), g.ints({1})}), g.ints({2})});
  return g.node("Mul", {signals, g.node("Unsqueeze", {scale, g.ints({2})})});
}

// The methods the forward pass calls: the channel norm, an unfolded BLSTM path, a head
// projection, and one GridNet block whose parameters come as one list (in the order
// torchscript() lists them: the two paths, then the query, key, value and output projections).
std::string gridnet_script_methods(const BlockSizes& sizes) {
  const std::string kernel = std::to_string(sizes.kernel), stride = std::to_string(sizes.stride);
  const std::string channels = std::to_string(sizes.channels), bins = std::to_string(sizes.bins);
  std::string script =
      "def _norm_channels(self, x: Tensor, gain: Tensor, bias: Tensor) -> Tensor:\n"
      "    mean = x.mean(1, keepdim=True)\n"
      "    variance = (x - mean).pow(2).mean(1, keepdim=True)\n"
      "    return (x - mean) * torch.rsqrt(variance + 1e-05) * gain + bias\n\n"
      "def _path(self, y: Tensor, weights: List[Tensor], weight: Tensor, bias: Tensor) -> Tensor:\n"
      "    steps = y.size(2)\n"
      "    padded = " + kernel + " if steps <= " + kernel + " else (steps - " + kernel + " + " +
      stride + " - 1) // " + stride + " * " + stride + " + " + kernel + "\n"
      "    u = torch.constant_pad_nd(y, [0, padded - steps], 0.0).unfold(2, " + kernel + ", " +
      stride + ").permute([0, 2, 1, 3])\n"
      "    u = u.reshape([u.size(0), u.size(1), " + std::to_string(sizes.channels * sizes.kernel) +
      "])\n"
      "    h0 = torch.zeros([2, u.size(0), " + std::to_string(sizes.hidden) +
      "], dtype=u.dtype)\n"
      "    hidden = torch.lstm(u, [h0, h0], weights, True, 1, 0.0, False, True, True)[0]\n"
      "    return torch.conv_transpose1d(hidden.transpose(1, 2), weight, bias, [" + stride +
      "]).narrow(2, 0, steps)\n\n"
      "def _project(self, x: Tensor, p: List[Tensor]) -> Tensor:\n"
      "    batch = x.size(0)\n"
      "    frames = x.size(2)\n"
      "    heads = p[2].size(0)\n"
      "    per_head = p[3].size(1)\n"
      "    y = torch.matmul(p[0], x.reshape([batch, x.size(1), frames * " + bins +
      "])) + p[1].view([1, -1, 1])\n"
      "    y = y.view([batch, heads, per_head, frames, " + bins + "])\n"
      "    y = torch.where(y >= 0, y, y * p[2].view([1, heads, 1, 1, 1]))\n"
      "    mean = y.mean([2, 4], keepdim=True)\n"
      "    variance = (y - mean).pow(2).mean([2, 4], keepdim=True)\n"
      "    return (y - mean) * torch.rsqrt(variance + 1e-05) * p[3].view([1, heads, per_head, 1, " +
      bins + "]) + p[4].view([1, heads, per_head, 1, " + bins + "])\n\n"
      "def _per_frame(self, y: Tensor) -> Tensor:\n"
      "    return y.permute([0, 1, 3, 2, 4]).reshape([y.size(0), y.size(1), y.size(3), -1])\n\n"
      "def _block(self, x: Tensor, p: List[Tensor]) -> Tensor:\n"
      "    batch = x.size(0)\n"
      "    frames = x.size(2)\n"
      "    y = self._norm_channels(x, p[0], p[1])\n"
      "    out = self._path(y.permute([0, 2, 1, 3]).reshape([batch * frames, " + channels + ", " +
      bins + "]), p[2:10], p[10], p[11])\n"
      "    x = x + out.view([batch, frames, " + channels + ", " + bins +
      "]).permute([0, 2, 1, 3])\n"
      "    y = self._norm_channels(x, p[12], p[13])\n"
      "    out = self._path(y.permute([0, 3, 1, 2]).reshape([batch * " + bins + ", " + channels +
      ", frames]), p[14:22], p[22], p[23])\n"
      "    x = x + out.view([batch, " + bins + ", " + channels + ", frames]).permute([0, 2, 3, 1])\n"
      "    queries = self._per_frame(self._project(x, p[24:29]))\n"
      "    keys = self._per_frame(self._project(x, p[29:34]))\n"
      "    values = self._per_frame(self._project(x, p[34:39]))\n"
      "    scores = torch.matmul(queries, keys.transpose(2, 3)) / (float(queries.size(3)) ** 0.5)\n"
      "    mixed = torch.matmul(torch.softmax(scores, 3), values)\n"
      "    merged = mixed.view([batch, " + std::to_string(sizes.heads) + ", frames, " +
      std::to_string(sizes.channels / sizes.heads) + ", " + bins +
      "]).permute([0, 1, 3, 2, 4]).reshape([batch, " + channels + ", frames, " + bins + "])\n"
      "    return x + self._project(merged, p[39:44]).squeeze(1)\n\n";
  return script;
}

// The forward pass of one unpadded batch [B, N] as TorchScript source (Model::torchscript): with
// no padding every frame is real and every BLSTM runs over the whole sequence, so no mask is
// needed. The window is the periodic Hann window build() takes from torch::hann_window, in double.
std::string TfGridNetModel::torchscript() const {
  const auto& o = options_;
  const std::string length = std::to_string(o.window_length);
  const std::string shift = std::to_string(o.window_shift);
  const std::string pad = std::to_string(o.window_length - o.window_shift);
  const std::string speakers = std::to_string(o.num_speakers), bins = std::to_string(o.bins());
  std::string script = gridnet_script_methods(o.block_sizes());
  script +=
      "def forward(self, x: Tensor) -> Tensor:\n"
      "    batch = x.size(0)\n"
      "    samples = x.size(1)\n"
      "    window = (0.5 - 0.5 * torch.cos(torch.arange(" + length +
      ").double() * (6.283185307179586 / " + length + ".0)))" +
      (o.window == StftWindow::kSqrtHann ? ".sqrt()" : "") + ".float()\n"
      "    frames = (max(samples, 1) - 1 + " + pad + ") // " + shift + " + 1\n"
      "    total = (frames - 1) * " + shift + " + " + length + "\n"
      "    mean = x.mean(1, keepdim=True)\n"
      "    scale = (x - mean).pow(2).mean(1, keepdim=True).sqrt().clamp_min(1e-08)\n"
      "    padded = torch.constant_pad_nd(x / scale, [" + pad + ", total - samples - " + pad +
      "], 0.0)\n"
      "    spectrum = torch.fft_rfft(padded.unfold(1, " + length + ", " + shift + ") * window, " +
      length + ", -1)\n"
      "    u = torch.view_as_real(spectrum).permute([0, 3, 1, 2])\n"
      "    u = self._norm_channels(torch.conv2d(u, self.input_conv_weight, self.input_conv_bias, "
      "[1, 1], [1, 1]), self.input_norm_gain, self.input_norm_bias)\n";
  const char* block_parameters[] = {
      "intra_norm_gain", "intra_norm_bias", "intra_lstm_weight_ih_l0", "intra_lstm_weight_hh_l0",
      "intra_lstm_bias_ih_l0", "intra_lstm_bias_hh_l0", "intra_lstm_weight_ih_l0_reverse",
      "intra_lstm_weight_hh_l0_reverse", "intra_lstm_bias_ih_l0_reverse",
      "intra_lstm_bias_hh_l0_reverse", "intra_projection_weight", "intra_projection_bias",
      "inter_norm_gain", "inter_norm_bias", "inter_lstm_weight_ih_l0", "inter_lstm_weight_hh_l0",
      "inter_lstm_bias_ih_l0", "inter_lstm_bias_hh_l0", "inter_lstm_weight_ih_l0_reverse",
      "inter_lstm_weight_hh_l0_reverse", "inter_lstm_bias_ih_l0_reverse",
      "inter_lstm_bias_hh_l0_reverse", "inter_projection_weight", "inter_projection_bias"};
  for (int b = 0; b < o.num_blocks; ++b) {
    const std::string prefix = "self.block" + std::to_string(b) + "_";
    std::string list;
    for (const char* name : block_parameters) list += (list.empty() ? "" : ", ") + prefix + name;
    for (const char* projection : {"query", "key", "value", "output"})
      for (const char* part : {"_weight", "_bias", "_slope", "_norm_gain", "_norm_bias"})
        list += ", " + prefix + projection + part;
    script += "    u = self._block(u, [" + list + "])\n";
  }
  script +=
      "    parts = torch.conv_transpose2d(u, self.output_conv_weight, self.output_conv_bias, "
      "[1, 1], [1, 1]).view([batch, " + speakers + ", 2, frames, " + bins + "])\n"
      "    spectra = torch.complex(parts.select(2, 0), parts.select(2, 1))\n"
      "    pieces = torch.fft_irfft(spectra, " + length + ", -1) * window\n"
      "    columns = pieces.reshape([batch * " + speakers + ", frames, " + length +
      "]).transpose(1, 2)\n"
      "    signals = torch.col2im(columns, [1, total], [1, " + length + "], [1, 1], [0, 0], [1, " +
      shift + "]).reshape([batch, " + speakers + ", total])\n"
      "    power = torch.col2im(window.square().view([1, " + length + ", 1]).expand([1, " + length +
      ", frames]), [1, total], [1, " + length + "], [1, 1], [0, 0], [1, " + shift +
      "]).reshape([1, 1, total])\n"
      "    signals = signals / power.clamp_min(1e-08)\n"
      "    return (signals.narrow(2, " + pad + ", samples) * scale.view([batch, 1, 1]))"
      ".transpose(1, 2)\n";
  return script;
}

}  // namespace

NABU_REGISTER_WITH_OPTIONS(model_registry, "tf_gridnet",
                           (make_model<TfGridNetModel, TfGridNetOptions>), TfGridNetOptions,
                           "TF-GridNet: STFT, sub-band and temporal BLSTMs over unfolded bins and "
                           "frames, full-band self-attention, one complex spectrum per speaker, "
                           "inverse STFT; waveform [B,N,1] -> [B,N,S]")

}  // namespace nabu
