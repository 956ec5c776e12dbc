// What the time-domain separation models (docs/models.md) share: conv_tasnet (Luo & Mesgarani
// 2019, conv_tasnet.cpp) and dprnn (Luo, Chen & Yoshioka 2020, dprnn.cpp). Both take the mixture
// waveform [B, N, 1] (a raw store) or [B, N] and give one waveform per speaker, [B, N, S], on the
// input's samples.
//
// Shared frame: a learned 1-D convolution encoder (kernel L, stride L/2, ReLU) turns the signal
// into K frames of N channels; a separator estimates one mask per speaker on those frames; the
// masked frames go through a transposed convolution decoder back to samples.
//
// Both are padding-safe like the recurrent models: utterance b's K_b frames are the ones that
// cover its samples, every layer zeroes the frames past K_b, normalisations take their statistics
// over real frames only and the recurrent layers run to each sequence's own length, so a padded
// batch gives each utterance exactly what it gives alone, and zeros past its length.
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/kernels/conv_tasnet_kernels.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/neuralnetworks/models/waveform_options.h"
#include "nabu/neuralnetworks/tensor_map.h"

namespace nabu::waveform {

namespace F = torch::nn::functional;


// x * mask, or x where the mask is undefined: a batch without padding (all its utterances as
// long as the batch) has no mask, since multiplying by ones changes nothing and each kernel left
// out is a launch less on a GPU.
inline torch::Tensor masked(const torch::Tensor& x, const torch::Tensor& mask) {
  return mask.defined() ? x * mask : x;
}

// What a stream keeps of a FrameNorm's past: cLN's running sums of the frames' channel sums and
// squares (in double, as cumsum accumulates on the CPU) and the frames seen.
struct NormHistory {
  torch::Tensor sum, squares;  // [B, 1, 1]
  int64_t frames = 0;
};

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

  static constexpr double kEpsilon = 1e-8;

  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) {
    const double channels = static_cast<double>(x.size(1));
    torch::Tensor mean, variance;
    switch (kind_) {
      case Norm::kGlobal: {
        // Without a mask the count is what the mask's sum times the channels gives, in float.
        auto count =
            mask.defined()
                ? (mask.sum({1, 2}, /*keepdim=*/true) * channels).clamp_min(1.0)
                : torch::full(
                      {x.size(0), 1, 1},
                      std::max(static_cast<float>(x.size(2)) * static_cast<float>(channels), 1.0F),
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

  // forward(prelu(x), mask): one CPU operation for gLN (conv_tasnet_kernels.h), the same
  // composition as forward() elsewhere.
  torch::Tensor forward_prelu(const torch::Tensor& x, torch::nn::PReLU& prelu,
                              const torch::Tensor& mask) {
    if (kind_ == Norm::kGlobal && conv_kernels::supports(x) && conv_kernels::supports(gain_) &&
        prelu->weight.numel() == 1 && (!mask.defined() || conv_kernels::supports(mask)))
      return conv_kernels::prelu_global_norm(x, prelu->weight, gain_, bias_, mask, kEpsilon);
    return forward(prelu->forward(x), mask);
  }

  // forward(x) for frames x that continue those `history` has seen (streaming; cLN and chanLN,
  // whose statistics look back only).
  torch::Tensor forward_continued(const torch::Tensor& x, NormHistory& history) {
    if (kind_ != Norm::kCumulative || x.size(2) == 0) return forward(x, {});
    const int64_t frames = x.size(2);
    auto sum = x.sum(1, /*keepdim=*/true).to(torch::kDouble).cumsum(2);
    auto squares = x.pow(2).sum(1, /*keepdim=*/true).to(torch::kDouble).cumsum(2);
    if (history.sum.defined()) {
      sum = sum + history.sum;
      squares = squares + history.squares;
    }
    history.sum = sum.narrow(2, frames - 1, 1);
    history.squares = squares.narrow(2, frames - 1, 1);
    auto count = torch::arange(history.frames + 1, history.frames + frames + 1, x.options())
                     .view({1, 1, -1}) *
                 static_cast<double>(x.size(1));
    history.frames += frames;
    auto mean = sum.to(x.scalar_type()) / count;
    auto variance = (squares.to(x.scalar_type()) / count - mean.pow(2)).clamp_min(0.0);
    return (x - mean) * torch::rsqrt(variance + kEpsilon) * gain_ + bias_;
  }

 private:
  Norm kind_;
  torch::Tensor gain_, bias_;
};
TORCH_MODULE(FrameNorm);

// What the encoder tells the separator and the decoder about a batch.
struct EncodedBatch {
  torch::Tensor frames;         // [B, N, K] after ReLU, zero past each K_b
  torch::Tensor mask;           // [B, 1, K], 1 on real frames; undefined when all K are real
  torch::Tensor frame_lengths;  // [B] K_b
  torch::Tensor real_samples;   // [B, N], 1 on each utterance's samples; undefined when all are
  int64_t samples = 0;          // the input's N
};

// The learned analysis/synthesis pair: Conv1d(1, N, L, stride L/2) + ReLU and its transposed
// convolution back to samples.
class WaveformCodec {
 public:
  int64_t kernel = 16, filters = 512;

  void build(torch::nn::Module& owner, const torch::Device& device) {
    encoder_ = owner.register_module(
        "encoder", torch::nn::Conv1d(
                       torch::nn::Conv1dOptions(1, filters, kernel).stride(stride()).bias(false)));
    decoder_ = owner.register_module(
        "decoder",
        torch::nn::ConvTranspose1d(
            torch::nn::ConvTranspose1dOptions(filters, 1, kernel).stride(stride()).bias(false)));
    encoder_->to(device);
    decoder_->to(device);
  }

  int64_t stride() const { return kernel / 2; }
  torch::Device device() const { return encoder_->weight.device(); }

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
      batch.real_samples =
          frame_mask(sample_lengths, batch.samples, waveform.scalar_type()).to(waveform.device());
    auto signal =
        F::pad(masked(waveform, batch.real_samples), F::PadFuncOptions({0, padded - batch.samples}))
            .unsqueeze(1);
    auto frame_lengths = batch.frame_lengths.cpu();
    if (frame_lengths.lt(frames).any().item<bool>())
      batch.mask = frame_mask(frame_lengths, frames, waveform.scalar_type())
                       .to(waveform.device())
                       .unsqueeze(1);
    batch.frames = masked(torch::relu(encoder_->forward(signal)), batch.mask);
    return batch;
  }

  // Streaming: the encoder's frames of signal [1, 1, n] (no padding), and the decoder's samples
  // [S, (K - 1) L/2 + L] of masked frames [S, N, K], before any overlap with other frames.
  torch::Tensor encode_frames(const torch::Tensor& signal) {
    return torch::relu(encoder_->forward(signal));
  }
  torch::Tensor decode_frames(const torch::Tensor& masked) {
    return decoder_->forward(masked).squeeze(1);
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


inline torch::Tensor mask_activation(const torch::Tensor& logits, MaskNonlinearity kind) {
  switch (kind) {
    case MaskNonlinearity::kRelu:
      return torch::relu(logits);
    case MaskNonlinearity::kSigmoid:
      return torch::sigmoid(logits);
    case MaskNonlinearity::kSoftmax:
      return torch::softmax(logits, 1);
  }
  return logits;
}

// The waveform input as [B, N]: [B, N, 1] from a raw store, or [B, N].
inline torch::Tensor waveform_input(const Model& model, const torch::Tensor& input) {
  if (input.dim() == 3 && input.size(2) == 1) return input.squeeze(2);
  if (input.dim() == 2) return input;
  throw Error(model.describe() +
              ": the input must be a waveform [B, N, 1] (feature = raw) or "
              "[B, N]");
}


// What both architectures share: the codec, then a norm and a 1x1 bottleneck to B channels.
class WaveformMaskModel : public Model {
 public:
  const WaveformOptions& waveform_options() const { return waveform_options_; }

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
    bottleneck_ = register_module("bottleneck", torch::nn::Conv1d(torch::nn::Conv1dOptions(
                                                    o.encoder_filters, o.bottleneck_channels, 1)));
    return device;
  }

  // The encoded batch, and the bottleneck features [B, B_channels, K] zero past each K_b.
  std::pair<EncodedBatch, torch::Tensor> encode(const std::vector<torch::Tensor>& inputs,
                                                const torch::Tensor& seq_lengths) {
    expect_inputs(inputs, 1, 1);
    auto encoded = codec_.encode(waveform_input(*this, inputs[0]), seq_lengths);
    auto features = masked(bottleneck_->forward(input_norm_->forward(encoded.frames, encoded.mask)),
                           encoded.mask);
    return {std::move(encoded), features};
  }

  // Mask logits [B, S, N, K] -> the speakers' waveforms [B, samples, S].
  torch::Tensor decode(const torch::Tensor& logits, const EncodedBatch& encoded) {
    auto masks = mask_activation(logits, waveform_options_.mask_nonlinearity);
    if (encoded.mask.defined()) masks = masks * encoded.mask.unsqueeze(1);
    return codec_.decode(masks * encoded.frames.unsqueeze(1), encoded);
  }

  // Streaming (Model::stream) through the shared front and back, for causal separators:
  // `separate` turns the bottleneck features of the frames that came in, [1, B_c, k], into their
  // mask logits [1, S N_f, k], keeping the separator's own history between calls.
  using StreamSeparator = std::function<torch::Tensor(const torch::Tensor& features)>;
  std::unique_ptr<ModelStream> waveform_stream(StreamSeparator separate) {
    return std::make_unique<Stream>(*this, std::move(separate));
  }

 private:
  // Frame k covers samples [k L/2, k L/2 + L): it is encoded once they have all arrived, and
  // the output before its start, which no later frame reaches, goes out (the last L/2 samples
  // wait for the next frame's overlap). finish() pads the end with zeros as encode() does.
  class Stream : public ModelStream {
   public:
    Stream(WaveformMaskModel& model, StreamSeparator separate)
        : model_(model), separate_(std::move(separate)) {
      pending_ = torch::zeros({0}, torch::TensorOptions().device(device()));
    }

    torch::Tensor push(const torch::Tensor& samples) override {
      torch::NoGradGuard no_grad;
      received_ += samples.numel();
      pending_ = torch::cat({pending_, samples.reshape({-1}).to(device(), torch::kFloat)});
      const auto& codec = model_.codec_;
      const int64_t ready = pending_.size(0) < codec.kernel
                                ? 0
                                : (pending_.size(0) - codec.kernel) / codec.stride() + 1;
      return run(ready, /*last=*/false);
    }

    torch::Tensor finish() override {
      torch::NoGradGuard no_grad;
      const auto& codec = model_.codec_;
      const int64_t total =
          received_ == 0 ? 0
                         : (std::max<int64_t>(received_ - codec.kernel, 0) + codec.stride() - 1) /
                                   codec.stride() +
                               1;
      const int64_t remaining = total - frames_;
      if (remaining > 0) {
        const int64_t needed = (remaining - 1) * codec.stride() + codec.kernel;
        pending_ = F::pad(pending_, F::PadFuncOptions({0, needed - pending_.size(0)}));
      }
      return run(std::max<int64_t>(remaining, 0), /*last=*/true);
    }

    int64_t lookahead() const override { return model_.codec_.stride(); }

   private:
    torch::Device device() const { return model_.codec_.device(); }

    // Encodes, separates and decodes the next `frames` frames of pending_.
    torch::Tensor run(int64_t frames, bool last) {
      auto& codec = model_.codec_;
      const int64_t speakers = model_.waveform_options_.num_speakers;
      torch::Tensor signals =
          overlap_.defined() ? overlap_ : torch::zeros({speakers, 0}, pending_.options());
      if (frames > 0) {
        auto signal = pending_.narrow(0, 0, (frames - 1) * codec.stride() + codec.kernel);
        pending_ =
            pending_.narrow(0, frames * codec.stride(), pending_.size(0) - frames * codec.stride());
        auto encoded = codec.encode_frames(signal.view({1, 1, -1}));
        auto features = model_.bottleneck_->forward(
            model_.input_norm_->forward_continued(encoded, norm_history_));
        auto logits = separate_(features).reshape({speakers, codec.filters, frames});
        auto masks =
            mask_activation(logits.unsqueeze(0), model_.waveform_options_.mask_nonlinearity)
                .squeeze(0);
        auto decoded = codec.decode_frames(masks * encoded);
        if (overlap_.defined()) decoded.narrow(1, 0, overlap_.size(1)).add_(overlap_);
        signals = decoded;
        frames_ += frames;
      }
      torch::Tensor out = signals;
      if (!last) {
        const int64_t final_samples = signals.size(1) - codec.stride();
        if (final_samples <= 0) return torch::zeros({speakers, 0}, pending_.options());
        out = signals.narrow(1, 0, final_samples);
        overlap_ = signals.narrow(1, final_samples, codec.stride()).clone();
      } else {
        out = out.narrow(1, 0, std::min(out.size(1), received_ - emitted_));
        overlap_ = torch::Tensor();
      }
      emitted_ += out.size(1);
      return out;
    }

    WaveformMaskModel& model_;
    StreamSeparator separate_;
    torch::Tensor pending_;  // samples not yet in an encoded frame
    torch::Tensor overlap_;  // [S, L/2]: the decoded frames' samples that await the next frame
    NormHistory norm_history_;
    int64_t received_ = 0, emitted_ = 0, frames_ = 0;
  };

  WaveformOptions waveform_options_;
  WaveformCodec codec_;
  FrameNorm input_norm_{nullptr};
  torch::nn::Conv1d bottleneck_{nullptr};
};

}  // namespace nabu::waveform
