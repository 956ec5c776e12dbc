#include "nabu/export/stft_onnx.h"

#include <cmath>
#include <limits>
#include <vector>

#include "nabu/core/error.h"
#include "nabu/core/onnx.h"

namespace nabu {

namespace {

using onnx::int_attribute;

std::string as_vector(onnx::Graph& graph, const std::string& scalar) {
  return graph.node("Reshape", {scalar, graph.ints({1})});
}

// 2 pi k n / nfft with k n reduced modulo nfft first, so that large products stay exact.
double angle(int64_t k, int64_t n, int nfft) {
  return 2.0 * M_PI * static_cast<double>((k * n) % nfft) / nfft;
}

}  // namespace

std::string onnx_snipped_length(onnx::Graph& graph, const std::string& length,
                                const FrameSettings& settings) {
  // keep = min(max(round(floor((N - winlen) / winstep) winstep + winlen), 0), N)
  auto to_double = int_attribute("to", static_cast<int64_t>(onnx::ElementType::kDouble));
  auto winlen = graph.doubles("winlen", {}, {settings.winlen * settings.sample_rate});
  auto winstep = graph.doubles("winstep", {}, {settings.winstep * settings.sample_rate});
  auto count = graph.node(
      "Floor",
      {graph.node("Div", {graph.node("Sub", {graph.node("Cast", {length}, {to_double}), winlen}),
                          winstep})});
  auto keep = graph.node(
      "Cast",
      {graph.node("Floor",
                  {graph.node("Add", {graph.node("Add", {graph.node("Mul", {count, winstep}), winlen}),
                                      graph.doubles("half", {}, {0.5})})})},
      {int_attribute("to", static_cast<int64_t>(onnx::ElementType::kInt64))});
  return graph.node("Min", {graph.node("Max", {keep, graph.int_scalar(0)}), length});
}

OnnxSpectrum onnx_stft(onnx::Graph& graph, const std::string& signal, const std::string& keep,
                       const FrameSettings& settings, double preemph) {
  const int64_t length = settings.frame_length(), step = settings.frame_step();
  const int nfft = settings.nfft;
  auto heard = graph.node("Slice", {signal, graph.ints({0}), as_vector(graph, keep), graph.ints({1})});
  if (preemph != 0.0) {
    const int64_t end = std::numeric_limits<int64_t>::max();
    auto first = graph.node("Slice", {heard, graph.ints({0}), graph.ints({1}), graph.ints({1})});
    auto later = graph.node("Slice", {heard, graph.ints({1}), graph.ints({end}), graph.ints({1})});
    auto before = graph.node("Slice", {heard, graph.ints({0}), graph.ints({-1}), graph.ints({1})});
    heard = graph.node(
        "Concat",
        {first, graph.node("Sub", {later, graph.node("Mul", {before, graph.doubles("preemph", {}, {preemph})})})},
        {int_attribute("axis", 1)});
  }
  // num_frames: 1 + ceil(max(keep - L, 0) / step); zeros up to (frames - 1) step + L.
  auto frames = graph.node(
      "Add",
      {graph.node("Div", {graph.node("Add", {graph.node("Max", {graph.node("Sub", {keep, graph.int_scalar(length)}),
                                                               graph.int_scalar(0)}),
                                             graph.int_scalar(step - 1)}),
                          graph.int_scalar(step)}),
       graph.int_scalar(1)});
  auto padding = graph.node(
      "Sub", {graph.node("Add", {graph.node("Mul", {graph.node("Sub", {frames, graph.int_scalar(1)}),
                                                    graph.int_scalar(step)}),
                                 graph.int_scalar(length)}),
              keep});
  auto padded = graph.node(
      "Pad", {heard, graph.node("Concat", {graph.ints({0, 0, 0}), as_vector(graph, padding)},
                                {int_attribute("axis", 0)})});
  const int64_t rows = std::min<int64_t>(length, nfft);  // rfft crops or zero-pads to nfft
  std::vector<int64_t> offsets(static_cast<std::size_t>(rows));
  for (int64_t n = 0; n < rows; ++n) offsets[static_cast<std::size_t>(n)] = n;
  auto starts = graph.node("Mul", {graph.node("Range", {graph.int_scalar(0), frames, graph.int_scalar(1)}),
                                   graph.int_scalar(step)});
  auto indices = graph.node("Add", {graph.node("Unsqueeze", {starts, graph.ints({1})}),
                                    graph.int64s("offsets", {1, rows}, offsets)});
  auto framed = graph.node("Gather", {padded, indices}, {int_attribute("axis", 1)});  // [B, T, rows]
  const auto window = make_window(settings.winfunc, length);
  const auto* w = window.data_ptr<double>();
  const int64_t bins = nfft / 2 + 1;
  std::vector<double> cosines(static_cast<std::size_t>(rows * bins)), sines(cosines.size());
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t k = 0; k < bins; ++k) {
      cosines[static_cast<std::size_t>(n * bins + k)] = w[n] * std::cos(angle(k, n, nfft));
      sines[static_cast<std::size_t>(n * bins + k)] = -w[n] * std::sin(angle(k, n, nfft));
    }
  return {graph.node("MatMul", {framed, graph.doubles("dft_real", {rows, bins}, cosines)}),
          graph.node("MatMul", {framed, graph.doubles("dft_imaginary", {rows, bins}, sines)})};
}

std::string onnx_inverse_stft(onnx::Graph& graph, const OnnxSpectrum& spectrum,
                              const FrameSettings& settings) {
  const int64_t length = settings.frame_length(), step = settings.frame_step();
  const int nfft = settings.nfft;
  if (length > nfft || length % step != 0)
    throw Error("the ONNX inverse STFT needs a frame (" + std::to_string(length) +
                " samples) no longer than nfft (" + std::to_string(nfft) +
                ") and a whole number of steps (" + std::to_string(step) + ")");
  const auto window = make_window(settings.winfunc, length);
  const auto* w = window.data_ptr<double>();
  const int64_t bins = nfft / 2 + 1;
  // irfft: the bins between DC and Nyquist count twice (their conjugates), DC and Nyquist once;
  // their imaginary parts are ignored (sin 0 = sin pi n = 0). Then the synthesis window.
  std::vector<double> real(static_cast<std::size_t>(bins * length)), imaginary(real.size());
  for (int64_t k = 0; k < bins; ++k) {
    const double weight = (k == 0 || 2 * k == nfft) ? 1.0 : 2.0;
    for (int64_t n = 0; n < length; ++n) {
      real[static_cast<std::size_t>(k * length + n)] = weight * std::cos(angle(k, n, nfft)) / nfft * w[n];
      imaginary[static_cast<std::size_t>(k * length + n)] = -weight * std::sin(angle(k, n, nfft)) / nfft * w[n];
    }
  }
  auto pieces = graph.node(
      "Add", {graph.node("MatMul", {spectrum.real, graph.doubles("idft_real", {bins, length}, real)}),
              graph.node("MatMul", {spectrum.imaginary,
                                    graph.doubles("idft_imaginary", {bins, length}, imaginary)})});
  auto signal = onnx::overlap_add(graph, pieces, 4, step, length / step);  // [B, S, total]
  // The sum of the squared windows over the same frames, floored at kEdgeFloor of its largest.
  std::vector<double> squares(static_cast<std::size_t>(length));
  for (int64_t n = 0; n < length; ++n) squares[static_cast<std::size_t>(n)] = w[n] * w[n];
  auto frames = graph.node("Slice", {graph.node("Shape", {spectrum.real}), graph.ints({2}), graph.ints({3})});
  auto repeated = graph.node(
      "Expand", {graph.doubles("window_squares", {1, length}, squares),
                 graph.node("Concat", {frames, graph.ints({length})}, {int_attribute("axis", 0)})});
  auto power = onnx::overlap_add(graph, repeated, 2, step, length / step);
  auto floor = graph.node(
      "Max", {graph.node("Mul", {graph.node("ReduceMax", {power}, {int_attribute("keepdims", 0)}),
                                 graph.doubles("edge_floor", {}, {kEdgeFloor})}),
              graph.doubles("least_floor", {}, {1e-15})});
  return graph.node("Div", {signal, graph.node("Max", {power, floor})});
}

}  // namespace nabu
