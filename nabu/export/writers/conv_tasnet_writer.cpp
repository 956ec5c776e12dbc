// The writer of conv_tasnet (neuralnetworks/models/conv_tasnet.cpp): its blocks between the
// shared codec (waveform_writer.h), as TorchScript and ONNX.
#include "nabu/core/onnx.h"
#include "nabu/export/writers/waveform_writer.h"

namespace nabu {
namespace {

using waveform::WaveformWriter;

// Where block b's depthwise convolution looks, as conv_tasnet.cpp builds it: causal blocks look
// back only, the others are centred.
struct BlockContext {
  int64_t left_context = 0, right_context = 0;
};

BlockContext block_context(const ConvTasNetOptions& o, std::size_t b) {
  const int64_t dilation = int64_t{1} << (static_cast<int64_t>(b) % o.blocks_per_repeat);
  const int64_t context = (o.conv_kernel_size - 1) * dilation;
  return o.causal ? BlockContext{context, 0} : BlockContext{context / 2, context / 2};
}

std::string conv_tasnet_onnx(const Model& model, onnx::Graph& graph, const std::string& waveform) {
  const ConvTasNetOptions* options = conv_tasnet_options(model);
  if (!options) return "";
  const auto& o = *options;
  const WaveformWriter w(model, o);
  const std::size_t blocks = static_cast<std::size_t>(o.repeats * o.blocks_per_repeat);
  auto encoded = w.onnx_encode(graph, waveform);
  auto features = encoded.features;
  std::string skips;
  for (std::size_t b = 0; b < blocks; ++b) {
    const BlockContext block = block_context(o, b);
    const std::string p = "block" + std::to_string(b) + "_";
    auto conv = [&](const std::string& x, const std::string& name,
                    std::vector<onnx::Attribute> attributes = {}) {
      return graph.node("Conv", {x, w.onnx_parameter(graph, p + name + ".weight"),
                                 w.onnx_parameter(graph, p + name + ".bias")},
                        std::move(attributes));
    };
    auto prelu = [&](const std::string& x, const std::string& name) {
      return graph.node("PRelu", {x, w.onnx_parameter(graph, p + name + ".weight")});
    };
    auto hidden = w.onnx_norm(graph, prelu(conv(features, "expand"), "prelu1"), p + "norm1.");
    hidden = conv(hidden, "depthwise",
                  {onnx::ints_attribute("dilations", {int64_t{1} << (b % o.blocks_per_repeat)}),
                   onnx::int_attribute("group", o.hidden_channels),
                   onnx::ints_attribute("pads", {block.left_context, block.right_context})});
    hidden = w.onnx_norm(graph, prelu(hidden, "prelu2"), p + "norm2.");
    if (b + 1 < blocks)
      features = graph.node("Add", {features, conv(hidden, "residual")});
    auto skip = conv(hidden, "skip");
    skips = skips.empty() ? skip : graph.node("Add", {skips, skip});
  }
  auto logits = graph.node(
      "Conv", {graph.node("PRelu", {skips, w.onnx_parameter(graph, "output_prelu.weight")}),
               w.onnx_parameter(graph, "mask.weight"), w.onnx_parameter(graph, "mask.bias")});
  return w.onnx_decode(graph, logits, encoded, waveform);
}

std::string conv_tasnet_script(const Model& model) {
  const ConvTasNetOptions* options = conv_tasnet_options(model);
  if (!options) return "";
  const auto& o = *options;
  const WaveformWriter w(model, o);
  const std::size_t blocks = static_cast<std::size_t>(o.repeats * o.blocks_per_repeat);
  std::string script = w.script_norm_method() +
                       "def forward(self, x: Tensor) -> Tensor:\n" + w.script_encode();
  for (std::size_t b = 0; b < blocks; ++b) {
    const BlockContext block = block_context(o, b);
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
    if (b + 1 < blocks)
      script += "    features = features + torch.conv1d(hidden, " + p + "residual_weight, " +
                p + "residual_bias)\n";
    script += std::string(b == 0 ? "    skips = " : "    skips = skips + ") +
              "torch.conv1d(hidden, " + p + "skip_weight, " + p + "skip_bias)\n";
  }
  script += "    logits = torch.conv1d(torch.prelu(skips, self.output_prelu_weight), "
            "self.mask_weight, self.mask_bias)\n";
  return script + w.script_decode();
}

const bool conv_tasnet_registered =
    register_model_writer({"conv_tasnet"}, {conv_tasnet_script, conv_tasnet_onnx, {}});

}  // namespace
}  // namespace nabu
