#include "nabu/processing/pitch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "nabu/processing/signal.h"

namespace nabu {

PitchEstimate estimate_pitch(const torch::Tensor& x, int sample_rate) {
  PitchEstimate result;
  const int64_t length = sample_rate / 25, hop = sample_rate / 50;
  auto signal = x.to(torch::kFloat64).reshape({-1});
  if (length <= 0 || signal.size(0) < length) return result;
  auto frames = signal.unfold(0, length, hop);  // [T, length]
  frames = frames - frames.mean(1, true);
  auto power = frames.square().mean(1);
  const double loudest = power.max().item<double>();
  if (loudest <= 0) return result;
  frames = frames.index({power >= loudest * 1e-3});
  result.speech_frames = frames.size(0);
  // The autocorrelation of each Hann-windowed frame, zero-padded to twice its length (no wrap).
  auto spectrum = torch::fft::rfft(frames * make_window("hanning", length), 2 * length, -1);
  auto correlation = torch::fft::irfft(spectrum.abs().square(), 2 * length, -1)
                         .slice(1, 0, length)
                         .contiguous();
  const int64_t lowest_lag = sample_rate / 400, highest_lag = sample_rate / 60;
  auto [peaks, at] = correlation.slice(1, lowest_lag, highest_lag).max(1);
  auto normalised = peaks / correlation.select(1, 0).clamp_min(1e-9);
  auto lags = (at + lowest_lag).to(torch::kFloat64);
  auto voiced = normalised > 0.5;
  result.voiced_share = voiced.to(torch::kFloat64).mean().item<double>();
  auto voiced_lags = lags.masked_select(voiced).contiguous();
  const int64_t count = voiced_lags.numel();
  if (count == 0) return result;
  std::vector<double> f0(static_cast<std::size_t>(count));
  const double* lag = voiced_lags.data_ptr<double>();
  for (int64_t i = 0; i < count; ++i) f0[i] = sample_rate / lag[i];
  // numpy's median: the mean of the two middle values of an even count.
  std::sort(f0.begin(), f0.end());
  const std::size_t middle = f0.size() / 2;
  result.median_f0_hz = f0.size() % 2 ? f0[middle] : 0.5 * (f0[middle - 1] + f0[middle]);
  return result;
}

double semitones_apart(double f0_a, double f0_b) {
  if (!(f0_a > 0) || !(f0_b > 0)) return std::numeric_limits<double>::infinity();
  return std::abs(12.0 * std::log2(f0_a / f0_b));
}

}  // namespace nabu
