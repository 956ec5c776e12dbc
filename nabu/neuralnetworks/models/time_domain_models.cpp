// Time-domain separation models (docs/models.md): conv_tasnet (Luo & Mesgarani 2019) and dprnn
// (Luo, Chen & Yoshioka 2020). Both take the mixture waveform [B, N, 1] (a raw store) or [B, N]
// and give one waveform per speaker, [B, N, S], on the input's samples.
//
// Shared frame: a learned 1-D convolution encoder (kernel L, stride L/2, ReLU) turns the signal
// into K frames of N channels; a separator estimates one mask per speaker on those frames; the
// masked frames go through a transposed convolution decoder back to samples.
//
// Both are padding-safe like the recurrent models: utterance b's K_b frames are the ones that
// cover its samples, every layer zeroes the frames past K_b, normalisations take their statistics
// over real frames only and the recurrent layers run to each sequence's own length, so a padded
// batch gives each utterance exactly what it gives alone, and zeros past its length.
#include <cmath>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/neuralnetworks/models/recurrent.h"
#include "nabu/neuralnetworks/tensor_map.h"

namespace nabu {
namespace {

namespace F = torch::nn::functional;

// ----------------------------------------------------------------------- shared building blocks

enum class Norm { kGlobal, kCumulative, kChannel };

void declare_norm(OptionsReader& r, const std::string& key, Norm& value, const std::string& help) {
  r.choice(key, value,
           {{"gLN", Norm::kGlobal}, {"cLN", Norm::kCumulative}, {"chanLN", Norm::kChannel}},
           help);
}

// x * mask, or x where the mask is undefined: a batch without padding (all its utterances as
// long as the batch) has no mask, since multiplying by ones changes nothing and each kernel left
// out is a launch less on a GPU.
torch::Tensor masked(const torch::Tensor& x, const torch::Tensor& mask) {
  return mask.defined() ? x * mask : x;
}

// Layer normalisation of x [B, C, T] with per-channel gain and bias. mask [B, 1, T] is 1 on real
// frames (undefined: all are). gLN: statistics over all channels and real frames of an
// utterance; cLN: over all channels and the frames up to t (causal); chanLN: over the channels
// of each frame.
class FrameNormImpl : public torch::nn::Module {
 public:
  FrameNormImpl(Norm kind, int64_t channels, const torch::Device& device) : kind_(kind) {
    auto options = torch::TensorOptions().device(device);
    gain_ = register_parameter("gain", torch::ones({1, channels, 1}, options));
    bias_ = register_parameter("bias", torch::zeros({1, channels, 1}, options));
  }

  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) {
    constexpr double kEpsilon = 1e-8;
    const double channels = static_cast<double>(x.size(1));
    torch::Tensor mean, variance;
    switch (kind_) {
      case Norm::kGlobal: {
        // Without a mask the count is what the mask's sum times the channels gives, in float.
        auto count =
            mask.defined()
                ? (mask.sum({1, 2}, /*keepdim=*/true) * channels).clamp_min(1.0)
                : torch::full({x.size(0), 1, 1},
                              std::max(static_cast<float>(x.size(2)) *
                                           static_cast<float>(channels), 1.0F),
                              x.options());
        mean = masked(x, mask).sum({1, 2}, /*keepdim=*/true) / count;
        variance = masked((x - mean).pow(2), mask).sum({1, 2}, /*keepdim=*/true) / count;
        break;
      }
      case Norm::kCumulative: {
        auto count = torch::arange(1, x.size(2) + 1, x.options()).view({1, 1, -1}) * channels;
        auto sum = x.sum(1, /*keepdim=*/true).cumsum(2);
        auto squares = x.pow(2).sum(1, /*keepdim=*/true).cumsum(2);
        mean = sum / count;
        variance = (squares / count - mean.pow(2)).clamp_min(0.0);
        break;
      }
      case Norm::kChannel:
        mean = x.mean(1, /*keepdim=*/true);
        variance = (x - mean).pow(2).mean(1, /*keepdim=*/true);
        break;
    }
    return masked((x - mean) * torch::rsqrt(variance + kEpsilon) * gain_ + bias_, mask);
  }

 private:
  Norm kind_;
  torch::Tensor gain_, bias_;
};
TORCH_MODULE(FrameNorm);

// What the encoder tells the separator and the decoder about a batch.
struct EncodedBatch {
  torch::Tensor frames;  // [B, N, K] after ReLU, zero past each K_b
  torch::Tensor mask;    // [B, 1, K], 1 on real frames; undefined when all K are real
  torch::Tensor frame_lengths;  // [B] K_b
  torch::Tensor real_samples;   // [B, N], 1 on each utterance's samples; undefined when all are
  int64_t samples = 0;   // the input's N
};

// The learned analysis/synthesis pair: Conv1d(1, N, L, stride L/2) + ReLU and its transposed
// convolution back to samples.
class WaveformCodec {
 public:
  int64_t kernel = 16, filters = 512;

  void build(torch::nn::Module& owner, const torch::Device& device) {
    encoder_ = owner.register_module(
        "encoder",
        torch::nn::Conv1d(torch::nn::Conv1dOptions(1, filters, kernel).stride(stride()).bias(false)));
    decoder_ = owner.register_module(
        "decoder", torch::nn::ConvTranspose1d(
                       torch::nn::ConvTranspose1dOptions(filters, 1, kernel).stride(stride()).bias(false)));
    encoder_->to(device);
    decoder_->to(device);
  }

  int64_t stride() const { return kernel / 2; }

  // Frames covering n samples: ceil(max(n − L, 0) / stride) + 1.
  torch::Tensor frames_for(const torch::Tensor& samples) const {
    auto beyond = (samples - kernel).clamp_min(0);
    return (beyond + stride() - 1).div(stride(), "floor") + 1;
  }

  EncodedBatch encode(const torch::Tensor& waveform, const torch::Tensor& lengths) {
    EncodedBatch batch;
    batch.samples = waveform.size(1);
    batch.frame_lengths = frames_for(lengths.to(torch::kLong));
    const int64_t frames = frames_for(torch::tensor({batch.samples})).item<int64_t>();
    const int64_t padded = (frames - 1) * stride() + kernel;
    // The last frame of an utterance reaches past its samples: zeros there, as when it is alone.
    auto sample_lengths = lengths.to(torch::kLong).cpu();
    if (sample_lengths.lt(batch.samples).any().item<bool>())
      batch.real_samples = frame_mask(sample_lengths, batch.samples, waveform.scalar_type())
                               .to(waveform.device());
    auto signal = F::pad(masked(waveform, batch.real_samples),
                         F::PadFuncOptions({0, padded - batch.samples}))
                      .unsqueeze(1);
    auto frame_lengths = batch.frame_lengths.cpu();
    if (frame_lengths.lt(frames).any().item<bool>())
      batch.mask = frame_mask(frame_lengths, frames, waveform.scalar_type())
                       .to(waveform.device())
                       .unsqueeze(1);
    batch.frames = masked(torch::relu(encoder_->forward(signal)), batch.mask);
    return batch;
  }

  // masked [B, S, N, K] -> waveforms [B, samples, S], zero past each utterance's length.
  torch::Tensor decode(const torch::Tensor& masked, const EncodedBatch& batch) {
    const int64_t utterances = masked.size(0), speakers = masked.size(1);
    auto flat = masked.reshape({utterances * speakers, masked.size(2), masked.size(3)});
    auto signals = decoder_->forward(flat).reshape({utterances, speakers, -1});
    signals = signals.narrow(2, 0, batch.samples).transpose(1, 2);
    return batch.real_samples.defined() ? signals * batch.real_samples.unsqueeze(2) : signals;
  }

 private:
  torch::nn::Conv1d encoder_{nullptr};
  torch::nn::ConvTranspose1d decoder_{nullptr};
};

enum class MaskNonlinearity { kRelu, kSigmoid, kSoftmax };

void declare_mask_nonlinearity(OptionsReader& r, MaskNonlinearity& value) {
  r.choice("mask_nonlinearity", value,
           {{"relu", MaskNonlinearity::kRelu},
            {"sigmoid", MaskNonlinearity::kSigmoid},
            {"softmax", MaskNonlinearity::kSoftmax}},
           "activation of the masks (softmax: over the speakers)");
}

torch::Tensor mask_activation(const torch::Tensor& logits, MaskNonlinearity kind) {
  switch (kind) {
    case MaskNonlinearity::kRelu: return torch::relu(logits);
    case MaskNonlinearity::kSigmoid: return torch::sigmoid(logits);
    case MaskNonlinearity::kSoftmax: return torch::softmax(logits, 1);
  }
  return logits;
}

// The waveform input as [B, N]: [B, N, 1] from a raw store, or [B, N].
torch::Tensor waveform_input(const Model& model, const torch::Tensor& input) {
  if (input.dim() == 3 && input.size(2) == 1) return input.squeeze(2);
  if (input.dim() == 2) return input;
  throw Error(model.describe() + ": the input must be a waveform [B, N, 1] (feature = raw) or "
                                 "[B, N]");
}

// Keys both architectures share.
struct WaveformOptions {
  std::string architecture;
  bool trainable = true;
  int num_speakers = 2;
  int kernel_size = 16;
  int encoder_filters = 512;
  int bottleneck_channels = 128;
  MaskNonlinearity mask_nonlinearity = MaskNonlinearity::kRelu;
  Norm norm = Norm::kGlobal;

  void declare_waveform(OptionsReader& r) {
    declare_common(r, architecture, trainable);
    r("num_speakers", num_speakers, "number of separated waveforms (S)");
    r("kernel_size", kernel_size,
      "encoder/decoder kernel L in samples (the stride is L/2; 16 = 2 ms at 8 kHz)");
    r("encoder_filters", encoder_filters, "encoder channels N");
    r("bottleneck_channels", bottleneck_channels, "channels B the separator works on");
    declare_mask_nonlinearity(r, mask_nonlinearity);
    declare_norm(r, "norm", norm,
                 "layer normalisation: gLN (global), cLN (cumulative, causal), chanLN (per "
                 "frame)");
    r.require(num_speakers >= 1, "num_speakers", "must be >= 1");
    r.require(kernel_size >= 2 && kernel_size % 2 == 0, "kernel_size", "must be even and >= 2");
    r.require(encoder_filters >= 1, "encoder_filters", "must be >= 1");
    r.require(bottleneck_channels >= 1, "bottleneck_channels", "must be >= 1");
  }
};

// What both architectures share: the codec, then a norm and a 1x1 bottleneck to B channels.
class WaveformMaskModel : public Model {
 protected:
  WaveformMaskModel(const std::string& name, const std::string& architecture,
                    const std::string& where, const WaveformOptions& options)
      : Model(name, architecture, options.trainable, where), waveform_options_(options) {}

  // Checks the input and builds the codec, the input norm and the bottleneck on its device.
  torch::Device build_front(const std::vector<torch::Tensor>& inputs) {
    expect_inputs(inputs, 1, 1);
    waveform_input(*this, inputs[0]);
    const auto& o = waveform_options_;
    const auto device = inputs[0].device();
    codec_.kernel = o.kernel_size;
    codec_.filters = o.encoder_filters;
    codec_.build(*this, device);
    input_norm_ = register_module("input_norm", FrameNorm(o.norm, o.encoder_filters, device));
    bottleneck_ = register_module(
        "bottleneck", torch::nn::Conv1d(torch::nn::Conv1dOptions(o.encoder_filters,
                                                                 o.bottleneck_channels, 1)));
    return device;
  }

  // The encoded batch, and the bottleneck features [B, B_channels, K] zero past each K_b.
  std::pair<EncodedBatch, torch::Tensor> encode(const std::vector<torch::Tensor>& inputs,
                                                const torch::Tensor& seq_lengths) {
    expect_inputs(inputs, 1, 1);
    auto encoded = codec_.encode(waveform_input(*this, inputs[0]), seq_lengths);
    auto features =
        masked(bottleneck_->forward(input_norm_->forward(encoded.frames, encoded.mask)),
               encoded.mask);
    return {std::move(encoded), features};
  }

  // Mask logits [B, S, N, K] -> the speakers' waveforms [B, samples, S].
  torch::Tensor decode(const torch::Tensor& logits, const EncodedBatch& encoded) {
    auto masks = mask_activation(logits, waveform_options_.mask_nonlinearity);
    if (encoded.mask.defined()) masks = masks * encoded.mask.unsqueeze(1);
    return codec_.decode(masks * encoded.frames.unsqueeze(1), encoded);
  }

 private:
  WaveformOptions waveform_options_;
  WaveformCodec codec_;
  FrameNorm input_norm_{nullptr};
  torch::nn::Conv1d bottleneck_{nullptr};
};

// --------------------------------------------------------------------------------- conv_tasnet

struct ConvTasNetOptions : WaveformOptions {
  int hidden_channels = 512;
  int skip_channels = 128;
  int conv_kernel_size = 3;
  int blocks_per_repeat = 8;
  int repeats = 3;
  bool causal = false;

  void declare(OptionsReader& r) {
    declare_waveform(r);
    r("hidden_channels", hidden_channels, "channels H inside each convolution block");
    r("skip_channels", skip_channels, "channels Sc of the skip connections");
    r("conv_kernel_size", conv_kernel_size, "kernel P of the depthwise convolutions");
    r("blocks_per_repeat", blocks_per_repeat,
      "blocks X per repeat, with dilations 1, 2, ..., 2^(X-1)");
    r("repeats", repeats, "repeats R of the dilated blocks");
    r("causal", causal,
      "True: the depthwise convolutions only look back and norm must be cLN (online use)");
    r.require(hidden_channels >= 1, "hidden_channels", "must be >= 1");
    r.require(skip_channels >= 1, "skip_channels", "must be >= 1");
    r.require(conv_kernel_size >= 1 && (causal || conv_kernel_size % 2 == 1), "conv_kernel_size",
              "must be odd (non-causal blocks keep the frames centred)");
    r.require(blocks_per_repeat >= 1, "blocks_per_repeat", "must be >= 1");
    r.require(repeats >= 1, "repeats", "must be >= 1");
    r.require(!causal || norm == Norm::kCumulative || norm == Norm::kChannel, "norm",
              "a causal model needs cLN or chanLN (gLN looks at the whole utterance)");
  }
};

// One block: 1x1 conv B->H, PReLU, norm, depthwise dilated conv, PReLU, norm; 1x1 convs to the
// residual (H->B) and the skip path (H->Sc).
struct TemporalBlock {
  torch::nn::Conv1d expand{nullptr}, depthwise{nullptr}, residual{nullptr}, skip{nullptr};
  torch::nn::PReLU first_activation{nullptr}, second_activation{nullptr};
  FrameNorm first_norm{nullptr}, second_norm{nullptr};
  int64_t left_context = 0, right_context = 0;
};

class ConvTasNetModel : public WaveformMaskModel {
 public:
  ConvTasNetModel(const std::string& name, const std::string& where, ConvTasNetOptions options)
      : WaveformMaskModel(name, "conv_tasnet", where, options), options_(std::move(options)) {}

 protected:
  void build(const std::vector<torch::Tensor>& inputs) override {
    const auto device = build_front(inputs);
    const auto& o = options_;
    for (int r = 0; r < o.repeats; ++r) {
      for (int x = 0; x < o.blocks_per_repeat; ++x) {
        const std::string prefix = "block" + std::to_string(r * o.blocks_per_repeat + x) + "_";
        const int64_t dilation = int64_t{1} << x;
        const int64_t context = (o.conv_kernel_size - 1) * dilation;
        TemporalBlock block;
        block.expand = register_module(
            prefix + "expand",
            torch::nn::Conv1d(torch::nn::Conv1dOptions(o.bottleneck_channels, o.hidden_channels, 1)));
        block.first_activation = register_module(prefix + "prelu1", torch::nn::PReLU());
        block.first_norm =
            register_module(prefix + "norm1", FrameNorm(o.norm, o.hidden_channels, device));
        block.depthwise = register_module(
            prefix + "depthwise",
            torch::nn::Conv1d(torch::nn::Conv1dOptions(o.hidden_channels, o.hidden_channels,
                                                       o.conv_kernel_size)
                                  .dilation(dilation)
                                  .groups(o.hidden_channels)));
        block.second_activation = register_module(prefix + "prelu2", torch::nn::PReLU());
        block.second_norm =
            register_module(prefix + "norm2", FrameNorm(o.norm, o.hidden_channels, device));
        // The last block's residual output would feed nothing: only its skip path is used.
        const bool last = r + 1 == o.repeats && x + 1 == o.blocks_per_repeat;
        if (!last)
          block.residual = register_module(
              prefix + "residual", torch::nn::Conv1d(torch::nn::Conv1dOptions(
                                       o.hidden_channels, o.bottleneck_channels, 1)));
        block.skip = register_module(
            prefix + "skip",
            torch::nn::Conv1d(torch::nn::Conv1dOptions(o.hidden_channels, o.skip_channels, 1)));
        block.left_context = o.causal ? context : context / 2;
        block.right_context = o.causal ? 0 : context / 2;
        blocks_.push_back(block);
      }
    }
    output_activation_ = register_module("output_prelu", torch::nn::PReLU());
    mask_layer_ = register_module(
        "mask", torch::nn::Conv1d(torch::nn::Conv1dOptions(
                    o.skip_channels, int64_t{o.num_speakers} * o.encoder_filters, 1)));
    to(device);
  }

  torch::Tensor forward_impl(const std::vector<torch::Tensor>& inputs,
                             const torch::Tensor& seq_lengths, bool training) override {
    auto [encoded, features] = encode(inputs, seq_lengths);
    const auto& mask = encoded.mask;
    torch::Tensor skips;
    for (auto& block : blocks_) {
      auto hidden = block.first_norm->forward(
          block.first_activation->forward(block.expand->forward(features)), mask);
      hidden = F::pad(hidden, F::PadFuncOptions({block.left_context, block.right_context}));
      hidden = block.second_norm->forward(
          block.second_activation->forward(block.depthwise->forward(hidden)), mask);
      if (!block.residual.is_empty())
        features = features + masked(block.residual->forward(hidden), mask);
      auto skip = block.skip->forward(hidden);
      skips = skips.defined() ? skips + skip : skip;
    }
    auto logits = mask_layer_->forward(output_activation_->forward(masked(skips, mask)));
    const int64_t batch = logits.size(0), frames = logits.size(2);
    logits = logits.reshape({batch, options_.num_speakers, options_.encoder_filters, frames});
    return decode(logits, encoded);
  }

 private:
  ConvTasNetOptions options_;
  torch::nn::Conv1d mask_layer_{nullptr};
  std::vector<TemporalBlock> blocks_;
  torch::nn::PReLU output_activation_{nullptr};
};

// ---------------------------------------------------------------------------------------- dprnn

struct DprnnOptions : WaveformOptions {
  int hidden_units = 128;
  int chunk_size = 100;
  int num_blocks = 6;

  DprnnOptions() {
    kernel_size = 16;
    encoder_filters = 64;
    bottleneck_channels = 64;
    mask_nonlinearity = MaskNonlinearity::kRelu;
  }

  void declare(OptionsReader& r) {
    declare_waveform(r);
    r("hidden_units", hidden_units, "units of each direction of every BLSTM");
    r("chunk_size", chunk_size, "frames per chunk K (chunks overlap by K/2)");
    r("num_blocks", num_blocks, "dual-path blocks (an intra-chunk and an inter-chunk BLSTM each)");
    r.require(hidden_units >= 1, "hidden_units", "must be >= 1");
    r.require(chunk_size >= 2 && chunk_size % 2 == 0, "chunk_size", "must be even and >= 2");
    r.require(num_blocks >= 1, "num_blocks", "must be >= 1");
    r.require(norm == Norm::kGlobal || norm == Norm::kChannel, "norm",
              "dprnn normalises with gLN or chanLN");
  }
};

// One path of a dual-path block: BLSTM, linear back to B channels, norm, residual.
struct DualPathLayer {
  torch::nn::LSTM lstm{nullptr};
  torch::nn::Linear projection{nullptr};
  FrameNorm norm{nullptr};
};

class DprnnModel : public WaveformMaskModel {
 public:
  DprnnModel(const std::string& name, const std::string& where, DprnnOptions options)
      : WaveformMaskModel(name, "dprnn", where, options), options_(std::move(options)) {}

 protected:
  void build(const std::vector<torch::Tensor>& inputs) override {
    const auto device = build_front(inputs);
    const auto& o = options_;
    auto path = [&](const std::string& prefix) {
      DualPathLayer layer;
      layer.lstm = register_module(
          prefix + "lstm",
          torch::nn::LSTM(torch::nn::LSTMOptions(o.bottleneck_channels, o.hidden_units)
                              .batch_first(true)
                              .bidirectional(true)));
      layer.projection = register_module(
          prefix + "projection",
          torch::nn::Linear(2 * int64_t{o.hidden_units}, o.bottleneck_channels));
      layer.norm =
          register_module(prefix + "norm", FrameNorm(o.norm, o.bottleneck_channels, device));
      return layer;
    };
    for (int b = 0; b < o.num_blocks; ++b) {
      intra_.push_back(path("block" + std::to_string(b) + "_intra_"));
      inter_.push_back(path("block" + std::to_string(b) + "_inter_"));
    }
    output_activation_ = register_module("output_prelu", torch::nn::PReLU());
    speaker_layer_ = register_module(
        "speakers", torch::nn::Conv1d(torch::nn::Conv1dOptions(
                        o.bottleneck_channels, int64_t{o.num_speakers} * o.bottleneck_channels, 1)));
    gate_tanh_ = register_module(
        "gate_tanh",
        torch::nn::Conv1d(torch::nn::Conv1dOptions(o.bottleneck_channels, o.bottleneck_channels, 1)));
    gate_sigmoid_ = register_module(
        "gate_sigmoid",
        torch::nn::Conv1d(torch::nn::Conv1dOptions(o.bottleneck_channels, o.bottleneck_channels, 1)));
    mask_layer_ = register_module(
        "mask", torch::nn::Conv1d(torch::nn::Conv1dOptions(o.bottleneck_channels,
                                                           o.encoder_filters, 1).bias(false)));
    to(device);
  }

  torch::Tensor forward_impl(const std::vector<torch::Tensor>& inputs,
                             const torch::Tensor& seq_lengths, bool training) override {
    auto [encoded, features] = encode(inputs, seq_lengths);  // features [B, C, K]
    const int64_t batch = features.size(0), channels = features.size(1);
    const int64_t frames = features.size(2);
    const int64_t chunk = options_.chunk_size, hop = chunk / 2;
    // Chunks of `chunk` frames every `hop` over the frames padded by `hop` on both sides and up
    // to a whole number of hops; position p of the padded sequence is real for utterance b when
    // p < hop + K_b (the front padding is the same zeros alone or in a batch).
    const int64_t chunks = (frames + hop - 1) / hop + 1;
    const int64_t padded = (chunks + 1) * hop;
    auto padded_features = F::pad(features, F::PadFuncOptions({hop, padded - frames - hop}));
    auto extent = encoded.frame_lengths.to(features.device()) + hop;  // [B]
    // x [B, C, chunks, chunk]
    auto x = padded_features.unfold(2, chunk, hop);
    auto position = (torch::arange(chunks, extent.options()) * hop).view({1, -1, 1}) +
                    torch::arange(chunk, extent.options()).view({1, 1, -1});
    auto valid = (position < extent.view({-1, 1, 1})).to(x.scalar_type());  // [B, chunks, chunk]
    auto valid_mask = valid.reshape({batch, 1, chunks * chunk});
    // Frames of each chunk that are real, and real chunks at each position within a chunk.
    auto intra_lengths = valid.sum(2).to(torch::kLong).reshape({-1});   // [B * chunks]
    auto inter_lengths = valid.sum(1).to(torch::kLong).reshape({-1});   // [B * chunk]
    for (std::size_t b = 0; b < intra_.size(); ++b) {
      // Intra-chunk: sequences of `chunk` frames, one per (utterance, chunk).
      auto sequences = x.permute({0, 2, 3, 1}).reshape({batch * chunks, chunk, channels});
      auto out = run_path(intra_[b], sequences, intra_lengths, training)
                     .reshape({batch, chunks, chunk, channels})
                     .permute({0, 3, 1, 2});
      x = x + normalised(intra_[b], out, valid_mask);
      // Inter-chunk: sequences of `chunks` steps, one per (utterance, position in the chunk).
      sequences = x.permute({0, 3, 2, 1}).reshape({batch * chunk, chunks, channels});
      out = run_path(inter_[b], sequences, inter_lengths, training)
                .reshape({batch, chunk, chunks, channels})
                .permute({0, 3, 2, 1});
      x = x + normalised(inter_[b], out, valid_mask);
    }
    // Speakers, then overlap-add of the chunks back to frames.
    auto flat = output_activation_->forward(x.reshape({batch, channels, chunks * chunk}));
    // fold wants [B*S, C*chunk, chunks], the position in the chunk innermost per channel.
    auto per_speaker = speaker_layer_->forward(flat)
                           .reshape({batch * options_.num_speakers, channels, chunks, chunk})
                           .permute({0, 1, 3, 2})
                           .reshape({batch * options_.num_speakers, channels * chunk, chunks});
    auto summed = F::fold(per_speaker, F::FoldFuncOptions({1, padded}, {1, chunk}).stride({1, hop}))
                      .reshape({batch * options_.num_speakers, channels, padded})
                      .narrow(2, hop, frames);
    auto gated = torch::tanh(gate_tanh_->forward(summed)) *
                 torch::sigmoid(gate_sigmoid_->forward(summed));
    auto logits = mask_layer_->forward(gated).reshape(
        {batch, options_.num_speakers, options_.encoder_filters, frames});
    return decode(logits, encoded);
  }

 private:
  // [sequences, steps, C] -> [sequences, steps, C]: BLSTM to each sequence's length, linear.
  torch::Tensor run_path(DualPathLayer& layer, const torch::Tensor& sequences,
                         const torch::Tensor& lengths, bool training) {
    auto hidden = recurrent::bidirectional_lstm(*layer.lstm, sequences, lengths, training);
    return layer.projection->forward(hidden);
  }

  // out [B, C, chunks, chunk] normalised over the valid positions, zero elsewhere.
  torch::Tensor normalised(DualPathLayer& layer, const torch::Tensor& out,
                           const torch::Tensor& valid_mask) {
    const auto sizes = out.sizes().vec();
    auto flat = out.reshape({sizes[0], sizes[1], sizes[2] * sizes[3]});
    return layer.norm->forward(flat * valid_mask, valid_mask).reshape(sizes);
  }

  DprnnOptions options_;
  torch::nn::Conv1d speaker_layer_{nullptr}, gate_tanh_{nullptr},
      gate_sigmoid_{nullptr}, mask_layer_{nullptr};
  std::vector<DualPathLayer> intra_, inter_;
  torch::nn::PReLU output_activation_{nullptr};
};

}  // namespace

NABU_REGISTER_WITH_OPTIONS(model_registry, "conv_tasnet",
                           (make_model<ConvTasNetModel, ConvTasNetOptions>), ConvTasNetOptions,
                           "Conv-TasNet: learned encoder, dilated depthwise convolution blocks "
                           "estimating one mask per speaker, decoder; waveform [B,N,1] -> [B,N,S]")
NABU_REGISTER_WITH_OPTIONS(model_registry, "dprnn", (make_model<DprnnModel, DprnnOptions>),
                           DprnnOptions,
                           "dual-path RNN: learned encoder, intra- and inter-chunk BLSTMs over "
                           "overlapping chunks, decoder; waveform [B,N,1] -> [B,N,S]")

}  // namespace nabu
