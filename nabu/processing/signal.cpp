#include "nabu/processing/signal.h"

#include <algorithm>
#include <cmath>

#include "nabu/core/error.h"

namespace nabu {

int64_t python_round(double value) {
  return static_cast<int64_t>(value < 0 ? std::ceil(value - 0.5) : std::floor(value + 0.5));
}

bool is_known_window(const std::string& name) {
  return name == "cosine" || name == "hanning" || name == "hamming" || name == "none" ||
         name == "None";
}

torch::Tensor make_window(const std::string& name, int64_t length) {
  auto options = torch::TensorOptions().dtype(torch::kFloat64);
  auto m = torch::arange(length, options);
  if (name == "cosine") return torch::sin(M_PI * (m + 0.5) / static_cast<double>(length));
  if (name == "none" || name == "None") return torch::ones({length}, options);
  if (length == 1) return torch::ones({1}, options);
  double denominator = static_cast<double>(length - 1);
  if (name == "hanning") return 0.5 - 0.5 * torch::cos(2.0 * M_PI * m / denominator);
  if (name == "hamming") return 0.54 - 0.46 * torch::cos(2.0 * M_PI * m / denominator);
  throw Error("unknown window function '" + name + "' (known: cosine, hanning, hamming, none)");
}

int64_t snipped_length(int64_t length, const FrameSettings& settings) {
  double fs = settings.sample_rate;
  // int() truncates toward zero, as in the original.
  int64_t n = static_cast<int64_t>((static_cast<double>(length) - settings.winlen * fs) /
                                   (settings.winstep * fs));
  int64_t keep = python_round(n * settings.winstep * fs + settings.winlen * fs);
  return std::min<int64_t>(std::max<int64_t>(keep, 0), length);
}

torch::Tensor snip(const torch::Tensor& signal, const FrameSettings& settings) {
  return signal.slice(0, 0, snipped_length(signal.size(0), settings));
}

int64_t frames_span(int64_t frames, const FrameSettings& settings) {
  return (frames - 1) * settings.frame_step() + settings.frame_length();
}

int64_t num_frames(int64_t length, const FrameSettings& settings) {
  int64_t frame_length = settings.frame_length(), step = settings.frame_step();
  if (length <= frame_length) return 1;
  return 1 + static_cast<int64_t>(
                 std::ceil(static_cast<double>(length - frame_length) / static_cast<double>(step)));
}

torch::Tensor frame_signal(const torch::Tensor& signal, const FrameSettings& settings) {
  int64_t frame_length = settings.frame_length(), step = settings.frame_step();
  if (frame_length <= 0 || step <= 0)
    throw Error("window length and step must be at least one sample");
  int64_t frames = num_frames(signal.size(0), settings);
  int64_t padded_length = (frames - 1) * step + frame_length;
  auto padded = torch::zeros({padded_length}, signal.options());
  padded.slice(0, 0, signal.size(0)).copy_(signal);
  auto framed = padded.unfold(0, frame_length, step);  // [T, frame_length]
  return framed * make_window(settings.winfunc, frame_length).to(signal.dtype());
}

torch::Tensor frames_spectrum(const torch::Tensor& frames, int nfft) {
  return torch::fft::rfft(frames, nfft, -1);
}

torch::Tensor overlap_add_inverse(const torch::Tensor& spectrum, const FrameSettings& settings,
                                  int64_t signal_length, double edge_floor) {
  int64_t frame_length = settings.frame_length(), step = settings.frame_step();
  int64_t frames = spectrum.size(0);
  // The original asserts that the inverse FFT gives whole frames (nfft == frame length); longer
  // inverse frames are cut to the frame length, shorter ones cannot be overlap-added.
  if (settings.nfft < frame_length)
    throw Error("overlap_add_inverse: nfft (" + std::to_string(settings.nfft) +
                ") is shorter than the frame length (" + std::to_string(frame_length) + ")");
  auto window = make_window(settings.winfunc, frame_length);
  // Weighted overlap-add: every inverse frame is windowed again and the sum divided by the sum
  // of the squared windows, the least-squares inverse of the analysis (docs/postprocessing.md).
  auto time_frames = torch::fft::irfft(spectrum, settings.nfft, -1)
                         .slice(1, 0, frame_length)
                         .to(torch::kFloat64) *
                     window;  // [T, frame_length]
  int64_t total = (frames - 1) * step + frame_length;
  // Overlap-add of frames and of windows through index_add (one kernel, no Python-style loop).
  auto positions = (torch::arange(frames, torch::kLong) * step).unsqueeze(1) +
                   torch::arange(frame_length, torch::kLong).unsqueeze(0);
  auto flat_positions = positions.reshape({-1});
  auto signal = torch::zeros({total}, torch::kFloat64)
                    .index_add_(0, flat_positions, time_frames.reshape({-1}));
  auto window_power = torch::zeros({total}, torch::kFloat64)
                          .index_add_(0, flat_positions, window.square().repeat({frames}));
  // At the first and last samples only the tails of one or two windows are left, and dividing
  // by their tiny sum turned whatever a mask leaves at a frame's edge into a click (up to 160x
  // with the cosine window). The divisor is floored at a fraction of its largest value, so the
  // signal fades in and out over those few samples instead.
  auto floor = edge_floor * window_power.max().item<double>();
  signal = signal / window_power.clamp_min(std::max(floor, 1e-15));
  // sigproc.deframesig: a signal length <= 0 means "unknown", keep every sample.
  if (signal_length <= 0) signal_length = total;
  return signal.slice(0, 0, std::min(signal_length, total));
}

}  // namespace nabu
