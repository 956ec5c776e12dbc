// The writer of tf_gridnet (neuralnetworks/models/tf_gridnet.h): the STFT, the GridNet blocks and
// the inverse STFT as TorchScript and ONNX.
#include "nabu/core/error.h"
#include "nabu/core/onnx.h"
#include "nabu/export/model_writers.h"
#include "nabu/neuralnetworks/models/tf_gridnet.h"

namespace nabu {
namespace {

using tf_gridnet::BlockSizes;

namespace gridnet_onnx {

using onnx::Graph;
using onnx::int_attribute;
using onnx::ints_attribute;

// The model's parameters by name (ModelParameters), as ONNX initializers of one graph.
struct Parameters {
  Graph& graph;
  const ModelParameters& values;
  std::string operator()(const std::string& name) const { return values.onnx(graph, name); }
  const torch::Tensor& at(const std::string& name) const { return values.at(name); }
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
std::string tf_gridnet_onnx(const Model& model, onnx::Graph& g, const std::string& waveform) {
  const TfGridNetOptions* options = tf_gridnet_options(model);
  if (!options) return "";
  using onnx::int_attribute;
  using onnx::ints_attribute;
  const auto& o = *options;
  const auto sizes = o.block_sizes();
  const int64_t length = o.window_length, shift = o.window_shift, pad = length - shift;
  const int64_t bins = sizes.bins, speakers = o.num_speakers;
  const ModelParameters parameters(model);
  const gridnet_onnx::Parameters p{g, parameters};
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
  auto window = parameters.at("window").to(torch::kDouble);
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

// The forward pass of one unpadded batch [B, N] as TorchScript source (model_torchscript): with
// no padding every frame is real and every BLSTM runs over the whole sequence, so no mask is
// needed. The window is the periodic Hann window build() takes from torch::hann_window, in double.
std::string tf_gridnet_script(const Model& model) {
  const TfGridNetOptions* options = tf_gridnet_options(model);
  if (!options) return "";
  const auto& o = *options;
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

const bool tf_gridnet_registered =
    register_model_writer({"tf_gridnet"}, {tf_gridnet_script, tf_gridnet_onnx, {}});

}  // namespace
}  // namespace nabu
