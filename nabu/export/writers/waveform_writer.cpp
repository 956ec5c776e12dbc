// ONNX of the time-domain models' shared codec and norms: the nodes mirror script_encode,
// script_decode and script_norm_method.
#include "nabu/export/writers/waveform_writer.h"

#include "nabu/core/onnx.h"
#include "nabu/neuralnetworks/models/waveform_mask_model.h"

namespace nabu::waveform {

using onnx::Graph;
using onnx::ints_attribute;

std::string WaveformWriter::onnx_norm(Graph& graph, const std::string& x,
                                         const std::string& prefix) const {
  std::string mean, variance;
  switch (options_.norm) {
    case Norm::kGlobal: {
      mean = graph.node("ReduceMean", {x}, {ints_attribute("axes", {1, 2})});
      auto centred = graph.node("Sub", {x, mean});
      variance = graph.node("ReduceMean", {graph.node("Mul", {centred, centred})},
                            {ints_attribute("axes", {1, 2})});
      break;
    }
    case Norm::kCumulative: {
      // Sums over the channels, cumulated over the frames, divided by C times the frame count.
      auto channel = graph.ints({1});
      auto sums =
          graph.node("CumSum", {graph.node("ReduceSum", {x, channel}), graph.int_scalar(2)});
      auto squares = graph.node(
          "CumSum",
          {graph.node("ReduceSum", {graph.node("Mul", {x, x}), channel}), graph.int_scalar(2)});
      auto shape = graph.node("Shape", {x});
      auto frames = graph.node("Gather", {shape, graph.int_scalar(2)});
      auto counts = graph.node(
          "Range", {graph.int_scalar(1), graph.node("Add", {frames, graph.int_scalar(1)}),
                    graph.int_scalar(1)});
      auto to_float = onnx::int_attribute("to", static_cast<int64_t>(onnx::ElementType::kFloat));
      auto channels =
          graph.node("Cast", {graph.node("Gather", {shape, graph.int_scalar(1)})}, {to_float});
      auto count = graph.node(
          "Mul",
          {graph.node("Unsqueeze", {graph.node("Cast", {counts}, {to_float}), graph.ints({0, 1})}),
           channels});
      mean = graph.node("Div", {sums, count});
      variance = graph.node("Max", {graph.node("Sub", {graph.node("Div", {squares, count}),
                                                       graph.node("Mul", {mean, mean})}),
                                    graph.scalar(0.0F)});
      break;
    }
    case Norm::kChannel: {
      mean = graph.node("ReduceMean", {x}, {ints_attribute("axes", {1})});
      auto centred = graph.node("Sub", {x, mean});
      variance = graph.node("ReduceMean", {graph.node("Mul", {centred, centred})},
                            {ints_attribute("axes", {1})});
      break;
    }
  }
  auto scale = graph.node(
      "Reciprocal",
      {graph.node("Sqrt", {graph.node("Add", {variance, graph.scalar(FrameNormImpl::kEpsilon)})})});
  auto normalised = graph.node("Mul", {graph.node("Sub", {x, mean}), scale});
  return graph.node("Add", {graph.node("Mul", {normalised, onnx_parameter(graph, prefix + "gain")}),
                            onnx_parameter(graph, prefix + "bias")});
}

WaveformWriter::OnnxEncoded WaveformWriter::onnx_encode(Graph& graph,
                                                              const std::string& waveform) const {
  const int64_t kernel = options_.kernel_size, stride = kernel / 2;
  OnnxEncoded out;
  out.samples = graph.node("Gather", {graph.node("Shape", {waveform}), graph.int_scalar(1)});
  // frames = (max(samples - L, 0) + L/2 - 1) / (L/2) + 1; zeros up to (frames - 1) L/2 + L.
  auto beyond = graph.node(
      "Max", {graph.node("Sub", {out.samples, graph.int_scalar(kernel)}), graph.int_scalar(0)});
  auto frames = graph.node(
      "Add", {graph.node("Div", {graph.node("Add", {beyond, graph.int_scalar(stride - 1)}),
                                 graph.int_scalar(stride)}),
              graph.int_scalar(1)});
  auto padding = graph.node(
      "Sub",
      {graph.node("Add", {graph.node("Mul", {graph.node("Sub", {frames, graph.int_scalar(1)}),
                                             graph.int_scalar(stride)}),
                          graph.int_scalar(kernel)}),
       out.samples});
  auto pads = graph.node(
      "Concat", {graph.ints({0, 0, 0, 0, 0}), graph.node("Reshape", {padding, graph.ints({1})})},
      {onnx::int_attribute("axis", 0)});
  auto signal = graph.node("Pad", {graph.node("Unsqueeze", {waveform, graph.ints({1})}), pads});
  out.encoded =
      graph.node("Relu", {graph.node("Conv", {signal, onnx_parameter(graph, "encoder.weight")},
                                     {ints_attribute("strides", {stride})})});
  out.features = graph.node("Conv", {onnx_norm(graph, out.encoded, "input_norm."),
                                     onnx_parameter(graph, "bottleneck.weight"),
                                     onnx_parameter(graph, "bottleneck.bias")});
  return out;
}

std::string WaveformWriter::onnx_decode(Graph& graph, const std::string& logits,
                                           const OnnxEncoded& encoded,
                                           const std::string& waveform) const {
  const auto& o = options_;
  auto shaped =
      graph.node("Reshape", {logits, graph.ints({0, o.num_speakers, o.encoder_filters, -1})});
  std::string masks;
  switch (o.mask_nonlinearity) {
    case MaskNonlinearity::kRelu:
      masks = graph.node("Relu", {shaped});
      break;
    case MaskNonlinearity::kSigmoid:
      masks = graph.node("Sigmoid", {shaped});
      break;
    case MaskNonlinearity::kSoftmax:
      masks = graph.node("Softmax", {shaped}, {onnx::int_attribute("axis", 1)});
      break;
  }
  auto masked =
      graph.node("Mul", {masks, graph.node("Unsqueeze", {encoded.encoded, graph.ints({1})})});
  auto frames = graph.node("Gather", {graph.node("Shape", {encoded.encoded}), graph.ints({2})});
  auto flat = graph.node(
      "Reshape", {masked, graph.node("Concat", {graph.ints({-1, o.encoder_filters}), frames},
                                     {onnx::int_attribute("axis", 0)})});
  auto signals = graph.node("ConvTranspose", {flat, onnx_parameter(graph, "decoder.weight")},
                            {ints_attribute("strides", {o.kernel_size / 2})});
  auto batch = graph.node("Gather", {graph.node("Shape", {waveform}), graph.ints({0})});
  auto by_speaker = graph.node(
      "Reshape", {signals, graph.node("Concat", {batch, graph.ints({o.num_speakers, -1})},
                                      {onnx::int_attribute("axis", 0)})});
  return graph.node("Slice",
                    {by_speaker, graph.ints({0}),
                     graph.node("Reshape", {encoded.samples, graph.ints({1})}), graph.ints({2})});
}

}  // namespace nabu::waveform
