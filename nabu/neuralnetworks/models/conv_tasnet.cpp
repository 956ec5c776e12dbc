// conv_tasnet (Luo & Mesgarani 2019, docs/models.md): the shared codec (waveform_mask_model.h)
// with a temporal convolution network of dilated depthwise blocks estimating the masks.
#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include <optional>

#include "nabu/neuralnetworks/kernels/conv_tasnet_kernels.h"
#include "nabu/neuralnetworks/models/recurrent.h"
#include "nabu/neuralnetworks/models/waveform_mask_model.h"
#include "nabu/neuralnetworks/kernels/mixed_precision.h"

namespace nabu {
namespace {

using namespace waveform;


// One block: 1x1 conv B->H, PReLU, norm, depthwise dilated conv, PReLU, norm; 1x1 convs to the
// residual (H->B) and the skip path (H->Sc).
struct TemporalBlock {
  torch::nn::Conv1d expand{nullptr}, depthwise{nullptr}, residual{nullptr}, skip{nullptr};
  torch::nn::PReLU first_activation{nullptr}, second_activation{nullptr};
  FrameNorm first_norm{nullptr}, second_norm{nullptr};
  int64_t dilation = 1, left_context = 0, right_context = 0;
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
        block.expand =
            register_module(prefix + "expand", torch::nn::Conv1d(torch::nn::Conv1dOptions(
                                                   o.bottleneck_channels, o.hidden_channels, 1)));
        block.first_activation = register_module(prefix + "prelu1", torch::nn::PReLU());
        block.first_norm =
            register_module(prefix + "norm1", FrameNorm(o.norm, o.hidden_channels, device));
        block.depthwise = register_module(
            prefix + "depthwise",
            torch::nn::Conv1d(
                torch::nn::Conv1dOptions(o.hidden_channels, o.hidden_channels, o.conv_kernel_size)
                    .dilation(dilation)
                    .groups(o.hidden_channels)));
        block.second_activation = register_module(prefix + "prelu2", torch::nn::PReLU());
        block.second_norm =
            register_module(prefix + "norm2", FrameNorm(o.norm, o.hidden_channels, device));
        // The last block's residual output would feed nothing: only its skip path is used.
        const bool last = r + 1 == o.repeats && x + 1 == o.blocks_per_repeat;
        if (!last)
          block.residual = register_module(prefix + "residual",
                                           torch::nn::Conv1d(torch::nn::Conv1dOptions(
                                               o.hidden_channels, o.bottleneck_channels, 1)));
        block.skip = register_module(prefix + "skip", torch::nn::Conv1d(torch::nn::Conv1dOptions(
                                                          o.hidden_channels, o.skip_channels, 1)));
        block.dilation = dilation;
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
    // On the CPU the blocks run as a few operations of their own (conv_tasnet_kernels.h), in
    // float whatever trainer.cfg's precision: under a bf16 autocast LibTorch 1.13's bf16
    // convolutions and the casts between them made the toy recipe's update 1.3x slower than
    // fp32, and bf16 products of its 1x1 convolutions (64 to 128 channels) gained less than the
    // layout changes around them cost (docs/results.md, "Conv-TasNet's blocks on the CPU").
    const bool on_cpu = inputs.at(0).device().is_cpu();
    std::optional<c10::impl::ExcludeDispatchKeyGuard> no_autocast;
    if (on_cpu) {
      if (cpu_autocast_in_bf16() && !said_fp32_) {
        logger().info("{}: conv_tasnet computes in fp32 on the CPU whatever the precision (its "
                     "bf16 was slower there: docs/results.md)",
                     describe());
        said_fp32_ = true;
      }
      no_autocast.emplace(c10::autocast_dispatch_keyset);
    }
    auto [encoded, features] = encode(inputs, seq_lengths);
    const auto& mask = encoded.mask;
    torch::Tensor skips;
    for (auto& block : blocks_) {
      auto hidden = block.first_norm->forward_prelu(block.expand->forward(features),
                                                    block.first_activation, mask);
      if (conv_kernels::supports(hidden))
        hidden = conv_kernels::depthwise_conv1d(hidden, block.depthwise->weight,
                                                block.depthwise->bias, block.dilation,
                                                block.left_context, block.right_context);
      else
        hidden = block.depthwise->forward(
            F::pad(hidden, F::PadFuncOptions({block.left_context, block.right_context})));
      hidden = block.second_norm->forward_prelu(hidden, block.second_activation, mask);
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

 public:
  // Causal blocks look back only: a stream keeps, per block, its norms' running sums and the last
  // (P - 1) d frames its dilated convolution sees, zeros at first as the offline padding.
  std::unique_ptr<ModelStream> stream() override {
    if (!options_.causal) return nullptr;
    struct BlockHistory {
      NormHistory first_norm, second_norm;
      torch::Tensor frames;  // [1, H, left_context]
    };
    auto histories = std::make_shared<std::vector<BlockHistory>>(blocks_.size());
    return waveform_stream([this, histories](const torch::Tensor& input) {
      auto features = input;
      torch::Tensor skips;
      for (std::size_t b = 0; b < blocks_.size(); ++b) {
        auto& block = blocks_[b];
        auto& history = (*histories)[b];
        auto hidden = block.first_norm->forward_continued(
            block.first_activation->forward(block.expand->forward(features)), history.first_norm);
        if (!history.frames.defined())
          history.frames = torch::zeros({1, hidden.size(1), block.left_context}, hidden.options());
        auto seen = torch::cat({history.frames, hidden}, 2);
        history.frames = seen.narrow(2, seen.size(2) - block.left_context, block.left_context);
        hidden = block.second_norm->forward_continued(
            block.second_activation->forward(block.depthwise->forward(seen)), history.second_norm);
        if (!block.residual.is_empty()) features = features + block.residual->forward(hidden);
        auto skip = block.skip->forward(hidden);
        skips = skips.defined() ? skips + skip : skip;
      }
      return mask_layer_->forward(output_activation_->forward(skips));
    });
  }
  std::string why_not_streamed() const override {
    return "conv_tasnet streams only when causal = True (its blocks then look back only)";
  }

  const ConvTasNetOptions& options() const { return options_; }

 private:
  ConvTasNetOptions options_;
  bool said_fp32_ = false;  // the log line of forward_impl, once
  torch::nn::Conv1d mask_layer_{nullptr};
  std::vector<TemporalBlock> blocks_;
  torch::nn::PReLU output_activation_{nullptr};
};

}  // namespace

const ConvTasNetOptions* conv_tasnet_options(const Model& model) {
  const auto* conv_tasnet = dynamic_cast<const ConvTasNetModel*>(&model);
  return conv_tasnet ? &conv_tasnet->options() : nullptr;
}

NABU_REGISTER_WITH_OPTIONS(model_registry, "conv_tasnet",
                           (make_model<ConvTasNetModel, ConvTasNetOptions>), ConvTasNetOptions,
                           "Conv-TasNet: learned encoder, dilated depthwise convolution blocks "
                           "estimating one mask per speaker, decoder; waveform [B,N,1] -> [B,N,S]")

}  // namespace nabu
