#include "nabu/evaluation/scorers/stoi.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "nabu/core/error.h"
#include "nabu/evaluation/scorers/scorer.h"

namespace nabu {

namespace {

constexpr int kRate = 10000;      // the analysis rate
constexpr int kFrame = 256;       // samples per frame
constexpr int kHop = kFrame / 2;  // 50 % overlap
constexpr int kFft = 512;         // DFT points (frames zero-padded)
constexpr int kBands = 15;        // one-third octave bands
constexpr double kLowestCentre = 150.0;
constexpr int kSegment = 30;       // frames per segment (384 ms)
constexpr double kBeta = -15.0;    // lower bound of the signal-to-distortion ratio, dB
constexpr double kDynamicRange = 40.0;  // dB below the loudest clean frame that are dropped
constexpr double kEps = std::numeric_limits<double>::epsilon();

// The Hann window of a frame without its zero end points: 0.5 - 0.5 cos(2 pi n / (L + 1)),
// n = 1..L.
const std::vector<double>& window() {
  static const std::vector<double> w = [] {
    std::vector<double> v(kFrame);
    for (int n = 0; n < kFrame; ++n)
      v[n] = 0.5 - 0.5 * std::cos(2.0 * M_PI * (n + 1) / (kFrame + 1));
    return v;
  }();
  return w;
}

// Start of every frame: 0, hop, ... while a whole frame and more remains (as the reference
// implementations frame, the last possible frame is not taken).
std::vector<std::size_t> frame_starts(std::size_t length) {
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i + kFrame < length; i += kHop) starts.push_back(i);
  return starts;
}

// Drops the frames whose clean energy is more than kDynamicRange below the loudest clean frame,
// from both signals, and puts the rest back together by overlap-add of the windowed frames.
void remove_silent_frames(std::vector<double>& clean, std::vector<double>& processed) {
  const auto& w = window();
  const auto starts = frame_starts(clean.size());
  std::vector<double> energy(starts.size());
  for (std::size_t f = 0; f < starts.size(); ++f) {
    double sum = 0;
    for (int n = 0; n < kFrame; ++n) {
      const double v = w[n] * clean[starts[f] + n];
      sum += v * v;
    }
    energy[f] = 20.0 * std::log10(std::sqrt(sum) + kEps);
  }
  const double loudest = starts.empty() ? 0.0 : *std::max_element(energy.begin(), energy.end());
  std::vector<std::size_t> kept;
  for (std::size_t f = 0; f < starts.size(); ++f)
    if (loudest - kDynamicRange - energy[f] < 0) kept.push_back(starts[f]);
  const std::size_t length = kept.empty() ? 0 : (kept.size() - 1) * kHop + kFrame;
  std::vector<double> clean_out(length, 0.0), processed_out(length, 0.0);
  for (std::size_t k = 0; k < kept.size(); ++k)
    for (int n = 0; n < kFrame; ++n) {
      clean_out[k * kHop + n] += w[n] * clean[kept[k] + n];
      processed_out[k * kHop + n] += w[n] * processed[kept[k] + n];
    }
  clean = std::move(clean_out);
  processed = std::move(processed_out);
}

// The bins [first, last) of each one-third octave band: the DFT bins nearest to the band's
// edges, 150 * 2^((2j -+ 1) / 6) Hz; bands past the last one that is as wide as the one before
// it (those cut by the Nyquist frequency) are dropped.
std::vector<std::pair<int, int>> band_bins() {
  const int bins = kFft / 2 + 1;
  auto nearest = [&](double frequency) {
    int best = 0;
    double best_distance = std::numeric_limits<double>::infinity();
    for (int k = 0; k < bins; ++k) {
      const double distance = std::abs(k * static_cast<double>(kRate) / kFft - frequency);
      if (distance < best_distance) {  // the first of equally near bins
        best = k;
        best_distance = distance;
      }
    }
    return best;
  };
  std::vector<std::pair<int, int>> bands;
  for (int j = 0; j < kBands; ++j)
    bands.emplace_back(nearest(kLowestCentre * std::pow(2.0, (2.0 * j - 1) / 6.0)),
                       nearest(kLowestCentre * std::pow(2.0, (2.0 * j + 1) / 6.0)));
  std::size_t used = 1;
  for (std::size_t j = 1; j < bands.size(); ++j) {
    const int width = bands[j].second - bands[j].first;
    if (width >= bands[j - 1].second - bands[j - 1].first && width != 0) used = j + 1;
  }
  bands.resize(used);
  return bands;
}

// The band envelopes of a signal: [band][frame]. The DFT is LibTorch's (pocketfft), over every
// frame at once.
std::vector<std::vector<double>> band_envelopes(const std::vector<double>& signal,
                                                const std::vector<std::pair<int, int>>& bands) {
  const auto& w = window();
  const auto starts = frame_starts(signal.size());
  std::vector<std::vector<double>> envelopes(bands.size(), std::vector<double>(starts.size()));
  if (starts.empty()) return envelopes;
  auto frames = torch::empty({static_cast<int64_t>(starts.size()), kFrame}, torch::kFloat64);
  auto* data = frames.data_ptr<double>();
  for (std::size_t f = 0; f < starts.size(); ++f)
    for (int n = 0; n < kFrame; ++n) data[f * kFrame + n] = w[n] * signal[starts[f] + n];
  const auto powers = torch::fft::rfft(frames, kFft, -1).abs().square().contiguous();
  const auto* power = powers.data_ptr<double>();
  const int64_t bins = powers.size(1);
  for (std::size_t f = 0; f < starts.size(); ++f)
    for (std::size_t j = 0; j < bands.size(); ++j) {
      double sum = 0;
      for (int k = bands[j].first; k < bands[j].second; ++k) sum += power[f * bins + k];
      envelopes[j][f] = std::sqrt(sum);
    }
  return envelopes;
}

double norm_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x * x;
  return std::sqrt(sum);
}

// v - mean(v), divided by its norm (+ eps).
void centre_and_normalise(std::vector<double>& v) {
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double& x : v) x -= mean;
  const double norm = norm_of(v) + kEps;
  for (double& x : v) x /= norm;
}

// STOI's intermediate measure of one band and segment: the clipped, scaled processed envelope
// correlated with the clean one.
double clipped_correlation(std::vector<double> x, std::vector<double> y) {
  const double scale = norm_of(x) / (norm_of(y) + kEps);
  const double bound = 1.0 + std::pow(10.0, -kBeta / 20.0);
  for (std::size_t n = 0; n < y.size(); ++n) y[n] = std::min(y[n] * scale, bound * x[n]);
  centre_and_normalise(x);
  centre_and_normalise(y);
  double sum = 0;
  for (std::size_t n = 0; n < x.size(); ++n) sum += x[n] * y[n];
  return sum;
}

// A segment's band x frame matrix normalised along time (each band), then along frequency (each
// frame): matrix[band][frame].
void normalise_rows_then_columns(std::vector<std::vector<double>>& matrix) {
  for (auto& row : matrix) centre_and_normalise(row);
  const std::size_t frames = matrix.front().size();
  std::vector<double> column(matrix.size());
  for (std::size_t t = 0; t < frames; ++t) {
    for (std::size_t j = 0; j < matrix.size(); ++j) column[j] = matrix[j][t];
    centre_and_normalise(column);
    for (std::size_t j = 0; j < matrix.size(); ++j) matrix[j][t] = column[j];
  }
}

std::vector<std::vector<double>> segment_of(const std::vector<std::vector<double>>& envelopes,
                                            std::size_t end) {
  std::vector<std::vector<double>> segment;
  for (const auto& band : envelopes)
    segment.emplace_back(band.begin() + (end - kSegment), band.begin() + end);
  return segment;
}

}  // namespace

std::vector<double> resample_for_stoi(const std::vector<double>& signal, int sample_rate) {
  if (sample_rate == kRate) return signal;
  if (sample_rate <= 0) throw Error("stoi: the sample rate is unknown");
  // The reference implementation resamples with MATLAB/Octave's resample: up by p, a
  // Kaiser-windowed sinc low-pass, down by q. Its filter, as Octave's resample.m designs it:
  // cut off at 1 / (2 max(p, q)) of the upsampled rate, 60 dB rejection, a transition band a
  // tenth of the cutoff; Kaiser's formulas give the length 2L + 1 and the window's beta. The
  // resampler matters: the top band (3.4-4.3 kHz) straddles the transition of an 8 kHz signal,
  // and libsoxr's steeper filter moved STOI by up to 3e-3 and ESTOI by 9e-3 on noisy speech.
  const long divisor = std::gcd(static_cast<long>(kRate), static_cast<long>(sample_rate));
  const long up = kRate / divisor, down = sample_rate / divisor;
  const double rejection_db = 60.0;
  const double cutoff = 1.0 / (2.0 * std::max(up, down));
  const double transition = cutoff / 10.0;
  const long half = static_cast<long>(std::ceil((rejection_db - 8.0) / (28.714 * transition)));
  const double beta = 0.1102 * (rejection_db - 8.7);
  auto bessel_i0 = [](double x) {  // the modified Bessel function of order 0, by its series
    double sum = 1.0, term = 1.0;
    for (int k = 1; k < 200 && term > 1e-17 * sum; ++k) {
      term *= (x / (2.0 * k)) * (x / (2.0 * k));
      sum += term;
    }
    return sum;
  };
  std::vector<double> filter(2 * half + 1);
  double total = 0;
  for (long n = -half; n <= half; ++n) {
    const double x = 2.0 * cutoff * n;
    const double sinc = n == 0 ? 1.0 : std::sin(M_PI * x) / (M_PI * x);
    const double ratio = static_cast<double>(n) / half;
    const double kaiser = bessel_i0(beta * std::sqrt(std::max(0.0, 1.0 - ratio * ratio))) /
                          bessel_i0(beta);
    filter[n + half] = kaiser * sinc;
    total += filter[n + half];
  }
  // Unit gain at 0 Hz after the zero stuffing: each output sample sums every up-th tap.
  for (double& tap : filter) tap *= static_cast<double>(up) / total;
  // y[m] = sum_k x[k] h[m down - k up + half]: the filter centred on the output's instant.
  const long length = static_cast<long>(signal.size());
  const long out_length = (length * up + down - 1) / down;
  std::vector<double> out(out_length, 0.0);
  for (long m = 0; m < out_length; ++m) {
    const long centre = m * down + half;  // index into the upsampled, filtered sequence
    long k_first = std::max(0L, (centre - 2 * half + up - 1) / up);
    const long k_last = std::min(length - 1, centre / up);
    double sum = 0;
    for (long k = k_first; k <= k_last; ++k) sum += signal[k] * filter[centre - k * up];
    out[m] = sum;
  }
  return out;
}

double stoi(const std::vector<double>& clean, const std::vector<double>& processed,
            int sample_rate, bool extended) {
  if (clean.size() != processed.size())
    throw Error("stoi: the clean signal has " + std::to_string(clean.size()) +
                " samples, the processed one " + std::to_string(processed.size()));
  auto x = resample_for_stoi(clean, sample_rate);
  auto y = resample_for_stoi(processed, sample_rate);
  remove_silent_frames(x, y);
  static const auto bands = band_bins();
  const auto clean_envelopes = band_envelopes(x, bands);
  const auto processed_envelopes = band_envelopes(y, bands);
  const std::size_t frames = clean_envelopes.front().size();
  if (frames < static_cast<std::size_t>(kSegment)) return 1e-5;
  double total = 0;
  std::size_t count = 0;
  for (std::size_t end = kSegment; end <= frames; ++end) {
    auto clean_segment = segment_of(clean_envelopes, end);
    auto processed_segment = segment_of(processed_envelopes, end);
    if (extended) {
      normalise_rows_then_columns(clean_segment);
      normalise_rows_then_columns(processed_segment);
      double sum = 0;
      for (std::size_t j = 0; j < clean_segment.size(); ++j)
        for (int t = 0; t < kSegment; ++t) sum += clean_segment[j][t] * processed_segment[j][t];
      total += sum / kSegment;
      ++count;
    } else {
      for (std::size_t j = 0; j < clean_segment.size(); ++j) {
        total += clipped_correlation(clean_segment[j], processed_segment[j]);
        ++count;
      }
    }
  }
  return total / static_cast<double>(count);
}

double stoi_of_sources(const torch::Tensor& references, const torch::Tensor& estimates,
                       int sample_rate, bool extended) {
  return mean_of_best_assignment(
      references, estimates, [&](const std::vector<double>& r, const std::vector<double>& e) {
        return stoi(r, e, sample_rate, extended);
      });
}

namespace {

// score_type stoi and estoi: per speaker the intelligibility of the estimate against its
// reference (0..1, higher is better); estimates assigned to references by the highest mean.
template <bool kExtended>
class StoiScorer : public PairScorer {
 public:
  explicit StoiScorer(const ConfigSection& section)
      : PairScorer(section, kExtended ? "estoi" : "stoi", {kExtended ? "ESTOI" : "STOI"}) {}
  bool needs_sample_rate() const override { return true; }
  std::string unit() const override { return ""; }

 protected:
  std::vector<double> score_pair(const torch::Tensor& reference, const torch::Tensor& estimate,
                                 int sample_rate) const override {
    return {stoi(signal_samples(reference), signal_samples(estimate), sample_rate, kExtended)};
  }
};

}  // namespace

ScorerPtr make_stoi_scorer(const ConfigSection& section, bool extended) {
  if (extended) return std::make_shared<StoiScorer<true>>(section);
  return std::make_shared<StoiScorer<false>>(section);
}

}  // namespace nabu
