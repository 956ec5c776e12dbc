#include "nabu/processing/pitch.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "nabu/processing/signal.h"

namespace nabu {

PitchTracker::PitchTracker(int sample_rate)
    : sample_rate_(sample_rate), length_(sample_rate / 25), hop_(sample_rate / 50) {}

void PitchTracker::push(const std::vector<double>& samples) {
  pending_.insert(pending_.end(), samples.begin(), samples.end());
  const int64_t available = static_cast<int64_t>(pending_.size());
  if (length_ <= 0 || hop_ <= 0 || available < length_) return;
  const int64_t count = 1 + (available - length_) / hop_;
  auto signal = torch::from_blob(pending_.data(), {available}, torch::kFloat64);
  auto frames = signal.unfold(0, length_, hop_).slice(0, 0, count);  // [T, length]
  frames = frames - frames.mean(1, true);
  auto power = frames.square().mean(1).contiguous();
  // The autocorrelation of each Hann-windowed frame, zero-padded to twice its length (no wrap).
  auto spectrum = torch::fft::rfft(frames * make_window("hanning", length_), 2 * length_, -1);
  auto correlation = torch::fft::irfft(spectrum.abs().square(), 2 * length_, -1).slice(1, 0, length_);
  const int64_t lowest_lag = sample_rate_ / 400, highest_lag = sample_rate_ / 60;
  auto [peaks, at] = correlation.slice(1, lowest_lag, highest_lag).max(1);
  auto normalised = (peaks / correlation.select(1, 0).clamp_min(1e-9)).contiguous();
  auto lags = (at + lowest_lag).to(torch::kFloat64).contiguous();
  for (int64_t t = 0; t < count; ++t) {
    power_.push_back(power.data_ptr<double>()[t]);
    peak_.push_back(normalised.data_ptr<double>()[t]);
    lag_.push_back(lags.data_ptr<double>()[t]);
  }
  pending_.erase(pending_.begin(), pending_.begin() + count * hop_);
}

PitchEstimate PitchTracker::result() const {
  PitchEstimate result;
  if (power_.empty()) return result;
  const double loudest = *std::max_element(power_.begin(), power_.end());
  if (loudest <= 0) return result;
  std::vector<double> f0;
  for (std::size_t t = 0; t < power_.size(); ++t) {
    if (power_[t] < loudest * 1e-3) continue;  // 30 dB below the loudest frame: not speech
    ++result.speech_frames;
    if (peak_[t] > 0.5) f0.push_back(sample_rate_ / lag_[t]);
  }
  result.voiced_share = static_cast<double>(f0.size()) / static_cast<double>(result.speech_frames);
  if (f0.empty()) return result;
  // numpy's median: the mean of the two middle values of an even count.
  std::sort(f0.begin(), f0.end());
  const std::size_t middle = f0.size() / 2;
  result.median_f0_hz = f0.size() % 2 ? f0[middle] : 0.5 * (f0[middle - 1] + f0[middle]);
  return result;
}

PitchEstimate estimate_pitch(const torch::Tensor& x, int sample_rate) {
  auto values = x.to(torch::kFloat64).reshape({-1}).contiguous();
  PitchTracker tracker(sample_rate);
  tracker.push(std::vector<double>(values.data_ptr<double>(),
                                   values.data_ptr<double>() + values.numel()));
  return tracker.result();
}

double semitones_apart(double f0_a, double f0_b) {
  if (!(f0_a > 0) || !(f0_b > 0)) return std::numeric_limits<double>::infinity();
  return std::abs(12.0 * std::log2(f0_a / f0_b));
}

}  // namespace nabu
