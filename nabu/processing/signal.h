// Framing and windowing exactly as the original's sigproc (docs/data_layout.md), on tensors. Shared
// by the feature computers (analysis) and the reconstructors (overlap-add synthesis).
#pragma once

#include <torch/torch.h>

#include <string>

namespace nabu {

// Python 2 round(): halves away from zero.
int64_t python_round(double value);

struct FrameSettings {
  int sample_rate = 8000;
  double winlen = 0.032;   // seconds
  double winstep = 0.008;  // seconds
  std::string winfunc = "cosine";
  int nfft = 256;

  int64_t frame_length() const { return python_round(winlen * sample_rate); }
  int64_t frame_step() const { return python_round(winstep * sample_rate); }
  int num_bins() const { return nfft / 2 + 1; }
};

// Window of `length` samples: cosine (sin(pi(m+0.5)/M)), hanning (numpy), hamming (scipy),
// none/None (rectangular). Throws Error for other names. Double precision.
torch::Tensor make_window(const std::string& name, int64_t length);
bool is_known_window(const std::string& name);

// Truncates the signal to a whole number of frame steps after one frame (the original's snip):
// n = int((len - winlen*fs) / (winstep*fs)); keep round(n*winstep*fs + winlen*fs) samples.
torch::Tensor snip(const torch::Tensor& signal, const FrameSettings& settings);
// The number of samples snip() keeps of `length`.
int64_t snipped_length(int64_t length, const FrameSettings& settings);

// Number of frames framesig() makes of `length` samples.
int64_t num_frames(int64_t length, const FrameSettings& settings);
// The samples `frames` consecutive frames cover: (frames - 1) steps plus one frame.
int64_t frames_span(int64_t frames, const FrameSettings& settings);

// Frames [T, frame_length] of a 1-D signal, zero-padded at the end, multiplied by the window.
torch::Tensor frame_signal(const torch::Tensor& signal, const FrameSettings& settings);

// Complex spectrum [T, nfft/2+1] of the windowed frames (numpy rfft semantics: frames longer than
// nfft are truncated, shorter ones zero-padded).
torch::Tensor frames_spectrum(const torch::Tensor& frames, int nfft);

// Inverse of the analysis above by weighted overlap-add (docs/postprocessing.md): irfft of every
// frame (frame_length samples), windowed again, overlap-added at frame_step, divided by the sum of
// the squared windows floored at `edge_floor` (kEdgeFloor) of its largest value, truncated to
// `signal_length` samples. No final normalisation. The original's spec2time divides by the sum of the windows
// without a floor, which turns a mask's leftovers at the first and last samples into clicks.
inline constexpr double kEdgeFloor = 0.1;
torch::Tensor overlap_add_inverse(const torch::Tensor& spectrum, const FrameSettings& settings,
                                  int64_t signal_length, double edge_floor = kEdgeFloor);

}  // namespace nabu
