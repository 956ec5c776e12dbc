// The writer of dprnn (neuralnetworks/models/dprnn.cpp): its dual-path blocks between the shared
// codec (waveform_writer.h), as TorchScript and ONNX.
#include "nabu/core/onnx.h"
#include "nabu/export/writers/waveform_writer.h"

namespace nabu {
namespace {

using waveform::WaveformWriter;

class DprnnWriter {
 public:
  DprnnWriter(const Model& model, const DprnnOptions& options)
      : options_(options), w_(model, options) {}

  std::string torchscript() const {
    const auto& o = options_;
    const std::string chunk = std::to_string(o.chunk_size), hop = std::to_string(o.chunk_size / 2);
    const std::string speakers = std::to_string(o.num_speakers);
    std::string script = w_.script_norm_method() + w_.script_masked_norm_method() + path_methods();
    script += "def forward(self, x: Tensor) -> Tensor:\n" + w_.script_encode();
    script +=
        "    batch = features.size(0)\n"
        "    channels = features.size(1)\n"
        "    frames = features.size(2)\n"
        "    chunks = (frames + " + hop + " - 1) // " + hop + " + 1\n"
        "    padded = (chunks + 1) * " + hop + "\n"
        "    u = torch.constant_pad_nd(features, [" + hop + ", padded - frames - " + hop +
        "], 0.0).unfold(2, " + chunk + ", " + hop + ")\n"
        "    position = (torch.arange(chunks) * " + hop + ").view([1, -1, 1]) + torch.arange(" +
        chunk + ").view([1, 1, -1])\n"
        "    valid = (position < frames + " + hop + ").to(u.dtype).expand([batch, chunks, " +
        chunk + "])\n"
        "    valid_mask = valid.reshape([batch, 1, chunks * " + chunk + "])\n"
        "    intra_lengths = valid.sum(2).long().reshape([-1])\n"
        "    inter_lengths = valid.sum(1).long().reshape([-1])\n";
    for (int b = 0; b < o.num_blocks; ++b) {
      const std::string intra = "block" + std::to_string(b) + "_intra_";
      const std::string inter = "block" + std::to_string(b) + "_inter_";
      script +=
          "    sequences = u.permute([0, 2, 3, 1]).reshape([batch * chunks, " + chunk +
          ", channels])\n"
          "    out = " + path_call(intra, "intra_lengths") + ".reshape([batch, chunks, " + chunk +
          ", channels]).permute([0, 3, 1, 2])\n"
          "    u = u + " + normalised_call(intra) + "\n"
          "    sequences = u.permute([0, 3, 2, 1]).reshape([batch * " + chunk +
          ", chunks, channels])\n"
          "    out = " + path_call(inter, "inter_lengths") + ".reshape([batch, " + chunk +
          ", chunks, channels]).permute([0, 3, 2, 1])\n"
          "    u = u + " + normalised_call(inter) + "\n";
    }
    script +=
        "    flat = torch.prelu(u.reshape([batch, channels, chunks * " + chunk +
        "]), self.output_prelu_weight)\n"
        "    per_speaker = torch.conv1d(flat, self.speakers_weight, self.speakers_bias).reshape("
        "[batch * " + speakers + ", channels, chunks, " + chunk + "]).permute([0, 1, 3, 2])"
        ".reshape([batch * " + speakers + ", channels * " + chunk + ", chunks])\n"
        "    summed = torch.col2im(per_speaker, [1, padded], [1, " + chunk + "], [1, 1], [0, 0], "
        "[1, " + hop + "]).reshape([batch * " + speakers + ", channels, padded]).narrow(2, " +
        hop + ", frames)\n"
        "    gated = torch.tanh(torch.conv1d(summed, self.gate_tanh_weight, "
        "self.gate_tanh_bias)) * torch.sigmoid(torch.conv1d(summed, self.gate_sigmoid_weight, "
        "self.gate_sigmoid_bias))\n"
        "    logits = torch.conv1d(gated, self.mask_weight, None).reshape([batch, " + speakers +
        " * " + std::to_string(o.encoder_filters) + ", frames])\n";
    return script + w_.script_decode();
  }

  // The same in ONNX nodes: the chunks gathered by index, every path's BLSTM as ONNX's LSTM run
  // to each sequence's length (sequence_lens), the norms over the valid positions, the chunks
  // overlap-added back by halves.
  std::string onnx(onnx::Graph& graph, const std::string& waveform) const {
    const auto& o = options_;
    const int64_t chunk = o.chunk_size, hop = o.chunk_size / 2, channels = o.bottleneck_channels;
    auto encoded = w_.onnx_encode(graph, waveform);
    auto shape = graph.node("Shape", {encoded.features});
    auto batch = graph.node("Slice", {shape, graph.ints({0}), graph.ints({1})});
    auto frames = graph.node("Gather", {shape, graph.int_scalar(2)});
    auto chunks = graph.node(
        "Add", {graph.node("Div", {graph.node("Add", {frames, graph.int_scalar(hop - 1)}),
                                   graph.int_scalar(hop)}),
                graph.int_scalar(1)});
    auto after = graph.node(
        "Sub", {graph.node("Mul", {graph.node("Add", {chunks, graph.int_scalar(1)}), graph.int_scalar(hop)}),
                graph.node("Add", {frames, graph.int_scalar(hop)})});
    auto padded = graph.node(
        "Pad", {encoded.features,
                graph.node("Concat", {graph.ints({0, 0, hop, 0, 0}), graph.node("Reshape", {after, graph.ints({1})})},
                           {onnx::int_attribute("axis", 0)})});
    std::vector<int64_t> offsets(static_cast<std::size_t>(chunk));
    for (int64_t k = 0; k < chunk; ++k) offsets[static_cast<std::size_t>(k)] = k;
    auto position = graph.node(
        "Add", {graph.node("Unsqueeze", {graph.node("Mul", {graph.node("Range", {graph.int_scalar(0), chunks, graph.int_scalar(1)}),
                                                           graph.int_scalar(hop)}),
                                         graph.ints({1})}),
                graph.int64s("offsets", {1, chunk}, offsets)});  // [chunks, chunk]
    auto u = graph.node("Gather", {padded, position}, {onnx::int_attribute("axis", 2)});
    const auto to = [](onnx::ElementType type) {
      return onnx::int_attribute("to", static_cast<int64_t>(type));
    };
    auto valid = graph.node(
        "Cast", {graph.node("Less", {position, graph.node("Add", {frames, graph.int_scalar(hop)})})},
        {to(onnx::ElementType::kFloat)});
    auto valid_mask = graph.node("Reshape", {valid, graph.ints({1, 1, -1})});
    // Each sequence's length, for every utterance of the batch (ONNX wants int32).
    const auto lengths = [&](int64_t axis) {
      return graph.node("Tile", {graph.node("Cast", {graph.node("ReduceSum", {valid, graph.ints({axis})}, {onnx::int_attribute("keepdims", 0)})},
                                            {onnx::int_attribute("to", 6)}),
                                 batch});
    };
    auto intra_lengths = lengths(1), inter_lengths = lengths(0);
    auto u_shape = graph.node("Shape", {u});
    for (std::size_t b = 0; b < static_cast<std::size_t>(options_.num_blocks); ++b) {
      const std::string block = "block" + std::to_string(b);
      auto sequences = graph.node("Reshape", {graph.node("Transpose", {u}, {onnx::ints_attribute("perm", {0, 2, 3, 1})}),
                                              graph.ints({-1, chunk, channels})});
      auto out = onnx_path(graph, block + "_intra_", sequences, intra_lengths);
      out = graph.node("Transpose", {graph.node("Reshape", {out, graph.node("Concat", {batch, graph.ints({-1, chunk, channels})}, {onnx::int_attribute("axis", 0)})})},
                       {onnx::ints_attribute("perm", {0, 3, 1, 2})});
      u = graph.node("Add", {u, onnx_normalised(graph, out, u_shape, valid_mask, block + "_intra_")});
      sequences = graph.node("Transpose", {u}, {onnx::ints_attribute("perm", {0, 3, 2, 1})});
      sequences = graph.node("Reshape", {sequences, graph.node("Concat", {graph.ints({-1}), graph.node("Unsqueeze", {chunks, graph.ints({0})}), graph.ints({channels})}, {onnx::int_attribute("axis", 0)})});
      out = onnx_path(graph, block + "_inter_", sequences, inter_lengths);
      out = graph.node("Transpose", {graph.node("Reshape", {out, graph.node("Concat", {batch, graph.ints({chunk, -1, channels})}, {onnx::int_attribute("axis", 0)})})},
                       {onnx::ints_attribute("perm", {0, 3, 2, 1})});
      u = graph.node("Add", {u, onnx_normalised(graph, out, u_shape, valid_mask, block + "_inter_")});
    }
    auto flat = graph.node("PRelu", {graph.node("Reshape", {u, graph.ints({0, channels, -1})}),
                                     w_.onnx_parameter(graph, "output_prelu.weight")});
    auto per_speaker = graph.node(
        "Reshape", {graph.node("Conv", {flat, w_.onnx_parameter(graph, "speakers.weight"), w_.onnx_parameter(graph, "speakers.bias")}),
                    graph.node("Concat", {graph.ints({-1, channels}), graph.node("Unsqueeze", {chunks, graph.ints({0})}), graph.ints({chunk})},
                               {onnx::int_attribute("axis", 0)})});
    auto summed = onnx::overlap_add(graph, per_speaker, 4, hop, 2);
    summed = graph.node("Slice", {summed, graph.ints({hop}),
                                  graph.node("Reshape", {graph.node("Add", {frames, graph.int_scalar(hop)}), graph.ints({1})}),
                                  graph.ints({2})});
    const auto conv = [&](const std::string& x, const std::string& name, bool bias) {
      std::vector<std::string> inputs{x, w_.onnx_parameter(graph, name + ".weight")};
      if (bias) inputs.push_back(w_.onnx_parameter(graph, name + ".bias"));
      return graph.node("Conv", inputs);
    };
    auto gated = graph.node("Mul", {graph.node("Tanh", {conv(summed, "gate_tanh", true)}),
                                    graph.node("Sigmoid", {conv(summed, "gate_sigmoid", true)})});
    auto logits = graph.node(
        "Reshape", {conv(gated, "mask", false),
                    graph.node("Concat", {batch, graph.ints({o.num_speakers * o.encoder_filters, -1})},
                               {onnx::int_attribute("axis", 0)})});
    return w_.onnx_decode(graph, logits, encoded, waveform);
  }

  // [N, T, C] -> [N, T, C]: the path's BLSTM to each sequence's length (zero past it), linear.
  std::string onnx_path(onnx::Graph& graph, const std::string& prefix,
                        const std::string& sequences, const std::string& lengths) const {
    const std::vector<torch::Tensor> parameters = w_.parameters().under(prefix + "lstm.");
    auto time_major = graph.node("Transpose", {sequences}, {onnx::ints_attribute("perm", {1, 0, 2})});
    auto hidden = onnx_recurrent_layer(graph, "LSTM", time_major, parameters, options_.hidden_units,
                                       true, prefix + "lstm_", lengths);
    hidden = graph.node("Transpose", {hidden}, {onnx::ints_attribute("perm", {1, 0, 2})});
    // Zero past each length, whatever the runtime leaves there.
    auto steps = graph.node("Range", {graph.int_scalar(0), graph.node("Gather", {graph.node("Shape", {hidden}), graph.int_scalar(1)}), graph.int_scalar(1)});
    auto real = graph.node("Cast", {graph.node("Less", {graph.node("Unsqueeze", {steps, graph.ints({0})}),
                                                       graph.node("Unsqueeze", {graph.node("Cast", {lengths}, {onnx::int_attribute("to", 7)}), graph.ints({1})})})},
                           {onnx::int_attribute("to", 1)});
    hidden = graph.node("Mul", {hidden, graph.node("Unsqueeze", {real, graph.ints({2})})});
    return graph.node("Add", {graph.node("MatMul", {hidden, onnx_floats(graph, prefix + "projection_weight", w_.parameters().at(prefix + "projection.weight").t())}),
                              onnx_floats(graph, prefix + "projection_bias", w_.parameters().at(prefix + "projection.bias"))});
  }

  // out [B, C, chunks, chunk] normalised over the valid positions (mask [1, 1, chunks chunk]).
  std::string onnx_normalised(onnx::Graph& graph, const std::string& out, const std::string& shape,
                              const std::string& mask, const std::string& prefix) const {
    auto x = graph.node("Mul", {graph.node("Reshape", {out, graph.ints({0, 0, -1})}), mask});
    std::string mean, variance;
    if (options_.norm == waveform::Norm::kGlobal) {
      auto count = graph.node(
          "Max", {graph.node("Mul", {graph.node("ReduceSum", {mask, graph.ints({1, 2})}),
                                     graph.scalar(static_cast<float>(options_.bottleneck_channels))}),
                  graph.scalar(1.0F)});
      mean = graph.node("Div", {graph.node("ReduceSum", {graph.node("Mul", {x, mask}), graph.ints({1, 2})}), count});
      auto centred = graph.node("Sub", {x, mean});
      variance = graph.node("Div", {graph.node("ReduceSum", {graph.node("Mul", {graph.node("Mul", {centred, centred}), mask}),
                                                graph.ints({1, 2})}),
                                    count});
    } else {
      mean = graph.node("ReduceMean", {x}, {onnx::ints_attribute("axes", {1})});
      auto centred = graph.node("Sub", {x, mean});
      variance = graph.node("ReduceMean", {graph.node("Mul", {centred, centred})}, {onnx::ints_attribute("axes", {1})});
    }
    auto scale = graph.node("Reciprocal", {graph.node("Sqrt", {graph.node("Add", {variance, graph.scalar(1e-8F)})})});
    auto normalised = graph.node(
        "Add", {graph.node("Mul", {graph.node("Mul", {graph.node("Sub", {x, mean}), scale}), w_.onnx_parameter(graph, prefix + "norm.gain")}),
                w_.onnx_parameter(graph, prefix + "norm.bias")});
    return graph.node("Reshape", {graph.node("Mul", {normalised, mask}), shape});
  }

  // TorchScript of a dual path: a BLSTM run to each sequence's length (the backward direction on
  // the sequences reversed within their lengths, as recurrent::bidirectional_lstm), zero past it,
  // then the projection; the norm of its output over the valid frames.
  std::string path_methods() const {
    const std::string units = std::to_string(options_.hidden_units);
    return "def _reverse(self, x: Tensor, lengths: Tensor) -> Tensor:\n"
           "    steps = torch.arange(x.size(1)).unsqueeze(0)\n"
           "    length = lengths.unsqueeze(1)\n"
           "    index = torch.where(steps < length, length - 1 - steps, steps)\n"
           "    return x.gather(1, index.unsqueeze(2).expand([-1, -1, x.size(2)]))\n\n"
           "def _path(self, x: Tensor, lengths: Tensor, forward_weights: List[Tensor], "
           "backward_weights: List[Tensor], weight: Tensor, bias: Tensor) -> Tensor:\n"
           "    h0 = torch.zeros([1, x.size(0), " + units + "], dtype=x.dtype)\n"
           "    forward = torch.lstm(x, [h0, h0], forward_weights, True, 1, 0.0, False, False, "
           "True)[0]\n"
           "    backward = self._reverse(torch.lstm(self._reverse(x, lengths), [h0, h0], "
           "backward_weights, True, 1, 0.0, False, False, True)[0], lengths)\n"
           "    real = (torch.arange(x.size(1)).unsqueeze(0) < lengths.unsqueeze(1)).to(x.dtype)"
           ".unsqueeze(2)\n"
           "    hidden = torch.cat([forward, backward], -1) * real\n"
           "    return torch.matmul(hidden, weight.t()) + bias\n\n"
           "def _normalised(self, out: Tensor, valid_mask: Tensor, gain: Tensor, bias: Tensor) -> "
           "Tensor:\n"
           "    flat = out.reshape([out.size(0), out.size(1), out.size(2) * out.size(3)])\n"
           "    return self._masked_norm(flat * valid_mask, valid_mask, gain, bias)"
           ".reshape(out.size())\n\n";
  }

  static std::string path_call(const std::string& prefix, const std::string& lengths) {
    const std::string lstm = "self." + prefix + "lstm_";
    return "self._path(sequences, " + lengths + ", [" + lstm + "weight_ih_l0, " + lstm +
           "weight_hh_l0, " + lstm + "bias_ih_l0, " + lstm + "bias_hh_l0], [" + lstm +
           "weight_ih_l0_reverse, " + lstm + "weight_hh_l0_reverse, " + lstm +
           "bias_ih_l0_reverse, " + lstm + "bias_hh_l0_reverse], self." + prefix +
           "projection_weight, self." + prefix + "projection_bias)";
  }

  static std::string normalised_call(const std::string& prefix) {
    return "self._normalised(out, valid_mask, self." + prefix + "norm_gain, self." + prefix +
           "norm_bias)";
  }

 private:
  const DprnnOptions& options_;
  WaveformWriter w_;
};

const bool dprnn_registered = register_model_writer(
    {"dprnn"},
    {[](const Model& model) {
       const DprnnOptions* options = dprnn_options(model);
       return options ? DprnnWriter(model, *options).torchscript() : std::string();
     },
     [](const Model& model, onnx::Graph& graph, const std::string& waveform) {
       const DprnnOptions* options = dprnn_options(model);
       return options ? DprnnWriter(model, *options).onnx(graph, waveform) : std::string();
     },
     {}});

}  // namespace
}  // namespace nabu
