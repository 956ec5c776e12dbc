// conv_tasnet (Luo & Mesgarani 2019, docs/models.md): the shared codec (waveform_mask_model.h)
// with a temporal convolution network of dilated depthwise blocks estimating the masks.
#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include <optional>

#include "nabu/core/onnx.h"
#include "nabu/neuralnetworks/kernels/conv_tasnet_kernels.h"
#include "nabu/neuralnetworks/models/recurrent.h"
#include "nabu/neuralnetworks/models/waveform_mask_model.h"
#include "nabu/neuralnetworks/kernels/mixed_precision.h"

namespace nabu {
namespace {

using namespace waveform;

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

  std::string onnx(onnx::Graph& graph, const std::string& waveform) const override {
    const auto& o = options_;
    auto encoded = onnx_encode(graph, waveform);
    auto features = encoded.features;
    std::string skips;
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
      const auto& block = blocks_[b];
      const std::string p = "block" + std::to_string(b) + "_";
      auto conv = [&](const std::string& x, const std::string& name,
                      std::vector<onnx::Attribute> attributes = {}) {
        return graph.node("Conv", {x, onnx_parameter(graph, p + name + ".weight"),
                                   onnx_parameter(graph, p + name + ".bias")},
                          std::move(attributes));
      };
      auto prelu = [&](const std::string& x, const std::string& name) {
        return graph.node("PRelu", {x, onnx_parameter(graph, p + name + ".weight")});
      };
      auto hidden = onnx_norm(graph, prelu(conv(features, "expand"), "prelu1"), p + "norm1.");
      hidden = conv(hidden, "depthwise",
                    {onnx::ints_attribute("dilations", {int64_t{1} << (b % o.blocks_per_repeat)}),
                     onnx::int_attribute("group", o.hidden_channels),
                     onnx::ints_attribute("pads", {block.left_context, block.right_context})});
      hidden = onnx_norm(graph, prelu(hidden, "prelu2"), p + "norm2.");
      if (!block.residual.is_empty())
        features = graph.node("Add", {features, conv(hidden, "residual")});
      auto skip = conv(hidden, "skip");
      skips = skips.empty() ? skip : graph.node("Add", {skips, skip});
    }
    auto logits = graph.node(
        "Conv", {graph.node("PRelu", {skips, onnx_parameter(graph, "output_prelu.weight")}),
                 onnx_parameter(graph, "mask.weight"), onnx_parameter(graph, "mask.bias")});
    return onnx_decode(graph, logits, encoded, waveform);
  }

  std::string torchscript() const override {
    const auto& o = options_;
    std::string script = script_norm_method() +
                         "def forward(self, x: Tensor) -> Tensor:\n" + script_encode();
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
      const auto& block = blocks_[b];
      const std::string p = "self.block" + std::to_string(b) + "_";
      const int64_t dilation = int64_t{1} << (b % o.blocks_per_repeat);
      script += "    hidden = self._norm(torch.prelu(torch.conv1d(features, " + p +
                "expand_weight, " + p + "expand_bias), " + p + "prelu1_weight), " + p +
                "norm1_gain, " + p + "norm1_bias)\n";
      script += "    hidden = torch.constant_pad_nd(hidden, [" +
                std::to_string(block.left_context) + ", " + std::to_string(block.right_context) +
                "], 0.0)\n";
      script += "    hidden = self._norm(torch.prelu(torch.conv1d(hidden, " + p +
                "depthwise_weight, " + p + "depthwise_bias, [1], [0], [" +
                std::to_string(dilation) + "], " + std::to_string(o.hidden_channels) + "), " +
                p + "prelu2_weight), " + p + "norm2_gain, " + p + "norm2_bias)\n";
      if (!block.residual.is_empty())
        script += "    features = features + torch.conv1d(hidden, " + p + "residual_weight, " +
                  p + "residual_bias)\n";
      script += std::string(b == 0 ? "    skips = " : "    skips = skips + ") +
                "torch.conv1d(hidden, " + p + "skip_weight, " + p + "skip_bias)\n";
    }
    script += "    logits = torch.conv1d(torch.prelu(skips, self.output_prelu_weight), "
              "self.mask_weight, self.mask_bias)\n";
    return script + script_decode();
  }

 private:
  ConvTasNetOptions options_;
  bool said_fp32_ = false;  // the log line of forward_impl, once
  torch::nn::Conv1d mask_layer_{nullptr};
  std::vector<TemporalBlock> blocks_;
  torch::nn::PReLU output_activation_{nullptr};
};

}  // namespace

NABU_REGISTER_WITH_OPTIONS(model_registry, "conv_tasnet",
                           (make_model<ConvTasNetModel, ConvTasNetOptions>), ConvTasNetOptions,
                           "Conv-TasNet: learned encoder, dilated depthwise convolution blocks "
                           "estimating one mask per speaker, decoder; waveform [B,N,1] -> [B,N,S]")

}  // namespace nabu
