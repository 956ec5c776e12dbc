// PESQ's perceptual model (ITU-T P.862 sections 10.2.3 to 10.2.12): Bark power densities of
// 50 % overlapping Hann frames, the frequency response and gain compensations, Zwicker's loudness,
// the symmetric and asymmetric disturbance per frame, bad intervals re-aligned, and the
// aggregation over split seconds and time.
#include "nabu/evaluation/scorers/pesq_model.h"

#include <algorithm>
#include <cmath>
#include <complex>

namespace nabu::pesq_detail {

namespace {

// The Recommendation's Bark bands at 16 kHz (49); at 8 kHz the first 42, the last of which
// gathers 11 bins and has its own correction factor.
constexpr int kBins16k[49] = {1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 2, 1, 1,
                              2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 4, 3, 4, 5, 4,
                              5, 6, 6, 7, 8, 9, 9, 12, 12, 15, 16, 18, 21, 25, 20};
constexpr double kCentreBark[49] = {
    0.078672,  0.316341,  0.636559,  0.961246,  1.290450,  1.624217,  1.962597,
    2.305636,  2.653383,  3.005889,  3.363201,  3.725371,  4.092449,  4.464486,
    4.841533,  5.223642,  5.610866,  6.003256,  6.400869,  6.803755,  7.211971,
    7.625571,  8.044611,  8.469146,  8.899232,  9.334927,  9.776288,  10.223374,
    10.676242, 11.134952, 11.599563, 12.070135, 12.546731, 13.029408, 13.518232,
    14.013264, 14.514566, 15.022202, 15.536238, 16.056736, 16.583761, 17.117382,
    17.657663, 18.204674, 18.758478, 19.319147, 19.886751, 20.461355, 21.043034};
constexpr double kWidthBark[49] = {
    0.157344, 0.317994, 0.322441, 0.326934, 0.331474, 0.336061, 0.340697, 0.345381, 0.350114,
    0.354897, 0.359729, 0.364611, 0.369544, 0.374529, 0.379565, 0.384653, 0.389794, 0.394989,
    0.400236, 0.405538, 0.410894, 0.416306, 0.421773, 0.427297, 0.432877, 0.438514, 0.444209,
    0.449962, 0.455774, 0.461645, 0.467577, 0.473569, 0.479621, 0.485736, 0.491912, 0.498151,
    0.504454, 0.510819, 0.517250, 0.523745, 0.530308, 0.536934, 0.543629, 0.550390, 0.557220,
    0.564119, 0.571085, 0.578125, 0.585232};
constexpr double kCorrection16k[49] = {
    100.000000, 99.999992, 100.000000, 100.000008, 100.000008, 100.000015, 99.999992,
    99.999969,  50.000027, 100.000000, 99.999969,  100.000015, 99.999947,  100.000061,
    53.047077,  110.000046, 117.991989, 65.000000, 68.760147,  69.999931,  71.428818,
    75.000038,  76.843384, 80.968781,  88.646126,  63.864388,  68.155350,  72.547775,
    75.584831,  58.379192, 80.950836,  64.135651,  54.384785,  73.821884,  64.437073,
    59.176456,  65.521278, 61.399822,  58.144047,  57.004543,  64.126297,  54.311001,
    61.114979,  55.077751, 56.849335,  55.628868,  53.137054,  54.985844,  79.546974};
constexpr double kHearingThreshold[49] = {
    51286152.0, 2454709.5, 70794.59375, 4897.788574, 1174.897705, 389.045166, 104.712860,
    45.708820,  17.782795, 9.772372,    4.897789,    3.090296,    1.905461,   1.258925,
    0.977237,   0.724436,  0.562341,    0.457088,    0.389045,    0.331131,   0.295121,
    0.269153,   0.257040,  0.251189,    0.251189,    0.251189,    0.251189,   0.263027,
    0.288403,   0.309030,  0.338844,    0.371535,    0.398107,    0.436516,   0.467735,
    0.489779,   0.501187,  0.501187,    0.512861,    0.524807,    0.524807,   0.524807,
    0.512861,   0.478630,  0.426580,    0.371535,    0.363078,    0.416869,   0.537032};

struct BarkBands {
  int count = 0;
  double power_scale = 0, loudness_scale = 0;  // Sp, Sl
  std::vector<int> bins;
  std::vector<double> centre, width, correction, threshold;
};

const BarkBands& bark_bands(int rate) {
  static const auto make = [](int count, double sp, double sl) {
    BarkBands b;
    b.count = count, b.power_scale = sp, b.loudness_scale = sl;
    b.bins.assign(kBins16k, kBins16k + count);
    b.centre.assign(kCentreBark, kCentreBark + count);
    b.width.assign(kWidthBark, kWidthBark + count);
    b.correction.assign(kCorrection16k, kCorrection16k + count);
    b.threshold.assign(kHearingThreshold, kHearingThreshold + count);
    if (count == 42) b.bins[41] = 11, b.correction[41] = 59.248363;
    return b;
  };
  static const BarkBands narrow = make(42, 2.764344e-5, 1.866055e-1);
  static const BarkBands wide = make(49, 6.910853e-6, 1.866055e-1);
  return rate == 8000 ? narrow : wide;
}

constexpr double kSilence5Samples = 500.0;  // sum of |x| over 5 samples below which is silence
constexpr double kBadFrame = 30.0;          // frame disturbance of a bad frame
constexpr long kSyllableFrames = 20;        // split-second aggregation window

using Rows = std::vector<std::vector<double>>;  // [frame][band]

// Loudness densities (sone) of one frame's Bark powers, Zwicker's law with the Recommendation's
// exponent raised below 4 Bark.
std::vector<double> loudness(const std::vector<double>& powers, const BarkBands& b) {
  std::vector<double> out(b.count, 0.0);
  for (int band = 0; band < b.count; ++band) {
    double h = b.centre[band] < 4 ? 6.0 / (b.centre[band] + 2.0) : 1.0;
    const double exponent = 0.23 * std::pow(std::min(h, 2.0), 0.15);
    const double threshold = b.threshold[band];
    if (powers[band] > threshold)
      out[band] = std::pow(threshold / 0.5, exponent) *
                  (std::pow(0.5 + 0.5 * powers[band] / threshold, exponent) - 1.0);
    out[band] *= b.loudness_scale;
  }
  return out;
}

// The Lp norm over bands 1.. weighted by the bands' widths, times the total width.
double weighted_norm(const std::vector<double>& x, const BarkBands& b, double p) {
  double total_width = 0, sum = 0;
  for (int band = 1; band < b.count; ++band) {
    sum += std::pow(std::fabs(x[band]) * b.width[band], p);
    total_width += b.width[band];
  }
  return std::pow(sum / total_width, 1.0 / p) * total_width;
}

double audible_power(const std::vector<double>& powers, const BarkBands& b, double factor) {
  double total = 0;
  for (int band = 1; band < b.count; ++band)
    if (powers[band] > factor * b.threshold[band]) total += powers[band];
  return total;
}

class PerceptualModel {
 public:
  PerceptualModel(const PaddedSignal& ref, const PaddedSignal& deg,
                  const std::vector<Utterance>& utts, const RateConstants& c)
      : ref_(ref), deg_(deg), utts_(utts), c_(c), bands_(bark_bands(c.rate)),
        nf_(c.downsample * 8), max_samples_(std::max(ref.samples, deg.samples)),
        window_(nf_) {
    for (long n = 0; n < nf_; ++n) window_[n] = 0.5 * (1.0 - std::cos(2.0 * M_PI * n / nf_));
  }

  double raw_mos();

 private:
  long buffer_end() const { return max_samples_ + c_.padding_samples(); }
  long signal_span() const { return max_samples_ - 2 * c_.search_samples() + c_.padding_samples(); }
  std::vector<double> bark_powers(const std::vector<double>& data, long start) const;
  long delay_at(long sample) const;
  void frame_range();
  void spectra();
  void compensate_frequency_response();
  void disturbances(long first, long last, bool keep_smaller);
  void skip_delay_jumps();
  std::vector<double> delayed_degraded() const;
  void realign_bad_intervals();
  double aggregate(const std::vector<double>& frames, double p_syllable, double p_time) const;

  const PaddedSignal& ref_;
  const PaddedSignal& deg_;
  const std::vector<Utterance>& utts_;
  const RateConstants& c_;
  const BarkBands& bands_;
  long nf_, max_samples_;
  std::vector<double> window_;
  long start_frame_ = 0, stop_frame_ = 0;
  Rows ref_rows_, deg_rows_;
  std::vector<bool> silent_;
  std::vector<double> ref_audible_, symmetric_, asymmetric_;
};

std::vector<double> PerceptualModel::bark_powers(const std::vector<double>& data,
                                                 long start) const {
  std::vector<std::complex<double>> x(nf_);
  for (long n = 0; n < nf_; ++n) x[n] = data[start + n] * window_[n];
  fft(x, false);
  std::vector<double> out(bands_.count, 0.0);
  long bin = 0;
  for (int band = 0; band < bands_.count; ++band) {
    double sum = 0;
    for (int i = 0; i < bands_.bins[band]; ++i, ++bin)
      if (bin > 0) sum += std::norm(x[bin]);  // the DC bin is left out
    out[band] = sum * bands_.correction[band] * bands_.power_scale;
  }
  return out;
}

// The delay of the utterance holding reference sample `sample` (the first's before it).
long PerceptualModel::delay_at(long sample) const {
  for (long u = static_cast<long>(utts_.size()) - 1; u >= 0; --u)
    if (utts_[u].start * c_.downsample <= sample) return utts_[u].delay;
  return utts_.front().delay;
}

// Frames from the reference's first to its last non-silent 5 samples.
void PerceptualModel::frame_range() {
  const long sb = c_.search_samples();
  auto quiet = [&](long first) {
    double sum = 0;
    for (long i = 0; i < 5; ++i) sum += std::fabs(ref_.data[first + i]);
    return sum < kSilence5Samples;
  };
  long skip_start = 0, skip_end = 0;
  while (quiet(sb + skip_start) && skip_start < max_samples_ / 2) ++skip_start;
  while (quiet(buffer_end() - sb - 5 - skip_end) && skip_end < max_samples_ / 2) ++skip_end;
  start_frame_ = skip_start / (nf_ / 2);
  stop_frame_ = (signal_span() - skip_end) / (nf_ / 2) - 1;
}

void PerceptualModel::spectra() {
  const long frames = stop_frame_ + 1;
  ref_rows_.assign(frames, {});
  deg_rows_.assign(frames, {});
  silent_.assign(frames, false);
  for (long frame = 0; frame < frames; ++frame) {
    const long ref_start = c_.search_samples() + frame * nf_ / 2;
    const long deg_start = ref_start + delay_at(ref_start);
    ref_rows_[frame] = bark_powers(ref_.data, ref_start);
    deg_rows_[frame] = deg_start > 0 && deg_start + nf_ < buffer_end()
                           ? bark_powers(deg_.data, deg_start)
                           : std::vector<double>(bands_.count, 0.0);
    silent_[frame] = audible_power(ref_rows_[frame], bands_, 1e2) < 1e7;
  }
}

// The reference scaled per band by the ratio of the signals' mean audible powers over the
// speech frames (limited to +-20 dB), so a linear filter is not heard as a disturbance.
void PerceptualModel::compensate_frequency_response() {
  const long frames = stop_frame_ + 1;
  const double divisor = static_cast<double>(signal_span() / (nf_ / 2) - 1);
  for (int band = 0; band < bands_.count; ++band) {
    double ref_mean = 0, deg_mean = 0;
    const double audible = 100.0 * bands_.threshold[band];
    for (long frame = 0; frame < frames; ++frame) {
      if (silent_[frame]) continue;
      if (ref_rows_[frame][band] > audible) ref_mean += ref_rows_[frame][band];
      if (deg_rows_[frame][band] > audible) deg_mean += deg_rows_[frame][band];
    }
    const double ratio =
        std::clamp((deg_mean / divisor + 1000.0) / (ref_mean / divisor + 1000.0), 0.01, 100.0);
    for (long frame = 0; frame < frames; ++frame) ref_rows_[frame][band] *= ratio;
  }
}

// Frames [first, last): the degraded powers scaled by the smoothed short-term gain, both
// warped to loudness, the disturbance beyond a dead zone of a quarter of the smaller loudness,
// its L2 norm (symmetric) and, weighted by the asymmetry of added over missing power, its L1 norm.
// `keep_smaller`: a re-aligned pass keeps each frame's smaller disturbance.
void PerceptualModel::disturbances(long first, long last, bool keep_smaller) {
  double previous_scale = 1.0;
  for (long frame = first; frame < last; ++frame) {
    const double ref_power = audible_power(ref_rows_[frame], bands_, 1.0);
    double scale = (ref_power + 5e3) / (audible_power(deg_rows_[frame], bands_, 1.0) + 5e3);
    if (frame > 0) scale = 0.2 * previous_scale + 0.8 * scale;
    previous_scale = scale;
    scale = std::clamp(scale, 3e-4, 5.0);
    for (double& v : deg_rows_[frame]) v *= scale;
    const auto ref_loudness = loudness(ref_rows_[frame], bands_);
    const auto deg_loudness = loudness(deg_rows_[frame], bands_);
    std::vector<double> d(bands_.count);
    for (int band = 0; band < bands_.count; ++band) {
      const double difference = deg_loudness[band] - ref_loudness[band];
      const double dead = 0.25 * std::min(deg_loudness[band], ref_loudness[band]);
      d[band] = difference > dead ? difference - dead : difference < -dead ? difference + dead : 0;
    }
    const double symmetric = weighted_norm(d, bands_, 2.0);
    for (int band = 0; band < bands_.count; ++band) {
      const double ratio = (deg_rows_[frame][band] + 50.0) / (ref_rows_[frame][band] + 50.0);
      const double h = std::min(std::pow(ratio, 1.2), 12.0);
      d[band] *= h < 3.0 ? 0.0 : h;
    }
    const double asymmetric = weighted_norm(d, bands_, 1.0);
    if (!keep_smaller) {
      ref_audible_[frame] = ref_power;
      symmetric_[frame] = symmetric, asymmetric_[frame] = asymmetric;
    } else {
      symmetric_[frame] = std::min(symmetric_[frame], symmetric);
      asymmetric_[frame] = std::min(asymmetric_[frame], asymmetric);
    }
  }
}

// Where the delay drops by more than half a frame between utterances, the frames the degraded
// signal repeats are not counted.
void PerceptualModel::skip_delay_jumps() {
  const long ds = c_.downsample, half = nf_ / 2;
  for (std::size_t u = 1; u < utts_.size(); ++u) {
    const long jump = utts_[u].delay - utts_[u - 1].delay;
    if (jump >= -half) continue;
    long first = ((utts_[u].start - kSearchFrames) * ds + utts_[u].delay) / half;
    const long previous = ((utts_[u - 1].end - kSearchFrames) * ds + utts_[u - 1].delay) / half;
    first = std::max(0L, std::min(first, previous));
    const long last = ((utts_[u].start - kSearchFrames) * ds + std::labs(jump)) / half + 1;
    for (long frame = first; frame <= last && frame < stop_frame_; ++frame)
      symmetric_[frame] = asymmetric_[frame] = 0;
  }
}

// The degraded signal moved by each utterance's delay onto the reference's time axis.
std::vector<double> PerceptualModel::delayed_degraded() const {
  const long sb = c_.search_samples(), end = buffer_end();
  std::vector<double> out(end, 0.0);
  for (long i = sb; i < end - sb; ++i)
    out[i] = deg_.data[std::clamp(i + delay_at(i), sb, end - sb - 1)];
  return out;
}

// The lag in [-range, range) of the highest normalised cross-correlation of the magnitudes of
// `a` and `b` (equal lengths); 0 when it is below 0.5 or a signal is silent.
long interval_delay(const std::vector<double>& a, const std::vector<double>& b, long range) {
  const long n = static_cast<long>(a.size());
  std::size_t size = 1;
  while (size < static_cast<std::size_t>(2 * n)) size <<= 1;
  double power_a = 0, power_b = 0;
  std::vector<std::complex<double>> x(size), y(size);
  for (long i = 0; i < n; ++i) {
    x[i] = std::fabs(a[i]), y[i] = std::fabs(b[i]);
    power_a += a[i] * a[i], power_b += b[i] * b[i];
  }
  power_a /= static_cast<double>(size), power_b /= static_cast<double>(size);
  if (power_a <= 1e-6 || power_b <= 1e-6) return 0;
  fft(x, false);
  fft(y, false);
  for (std::size_t k = 0; k < size; ++k) x[k] = std::conj(x[k]) * y[k];
  fft(x, true);
  const double normalisation = std::sqrt(power_a * power_b) * static_cast<double>(size);
  double best = 0;
  long lag = 0;
  for (long i = -range; i < range; ++i) {
    const double h = std::fabs(x[(i + static_cast<long>(size)) % size].real()) / normalisation;
    if (h > best) best = h, lag = i;
  }
  return best < 0.5 ? 0 : lag;
}

// Runs of (smeared) bad frames, of at least 5 frames, ending before the last frame.
std::vector<std::pair<long, long>> bad_intervals(const std::vector<double>& symmetric,
                                                 long stop_frame) {
  std::vector<bool> bad(stop_frame + 1), smeared(stop_frame + 1, false);
  for (long f = 0; f <= stop_frame; ++f) bad[f] = symmetric[f] > kBadFrame;
  bad[0] = false;
  for (long f = 2; f < stop_frame - 2; ++f)
    smeared[f] = std::min(bad[f - 2] || bad[f - 1] || bad[f], bad[f] || bad[f + 1] || bad[f + 2]);
  std::vector<std::pair<long, long>> intervals;
  for (long f = 0; f <= stop_frame && intervals.size() < 1000;) {
    while (f <= stop_frame && !smeared[f]) ++f;
    if (f > stop_frame) break;
    const long start = f;
    while (f <= stop_frame && smeared[f]) ++f;
    if (f <= stop_frame && f - start >= 5) intervals.emplace_back(start, f);
  }
  return intervals;
}

// Intervals of bad frames are searched for a better delay (up to 4 frames either way) and their
// disturbances recomputed there, keeping the smaller.
void PerceptualModel::realign_bad_intervals() {
  const long sb = c_.search_samples(), range = 4 * nf_;
  const auto delayed = delayed_degraded();
  auto realigned = delayed;
  const auto intervals = bad_intervals(symmetric_, stop_frame_);
  for (const auto& [first, last] : intervals) {
    const long start = first * nf_ / 2 + sb, stop = last * nf_ / 2 + nf_ + sb;
    const long length = stop - start;
    std::vector<double> ref(2 * range + length, 0.0), deg(2 * range + length);
    for (long i = 0; i < length; ++i) ref[range + i] = ref_.data[start + i];
    for (long i = 0; i < 2 * range + length; ++i)
      deg[i] = delayed[std::clamp(start - range + i, sb, max_samples_ - sb +
                                                             c_.padding_samples() - 1)];
    const long delay = interval_delay(ref, deg, range);
    for (long i = start; i < stop; ++i)
      realigned[i] = delayed[std::clamp(i + delay, 0L, max_samples_ - 1)];
  }
  for (const auto& [first, last] : intervals) {
    for (long frame = first; frame < last; ++frame)
      deg_rows_[frame] = bark_powers(realigned, sb + frame * nf_ / 2);
    disturbances(first, last, /*keep_smaller=*/true);
  }
}

// Split-second L_p_syllable norms over 20 frames (half overlapping; past the end counted as
// zero), then their L_p_time norm over time, weighted by the time weights.
double PerceptualModel::aggregate(const std::vector<double>& frames, double p_syllable,
                                  double p_time) const {
  // Long signals (over 1000 frames) weigh their end more, as listeners remember it better.
  std::vector<double> weight(stop_frame_ + 1, 1.0);
  if (stop_frame_ + 1 > 1000) {
    const long n = (max_samples_ - 2 * c_.search_samples()) / (nf_ / 2) - 1;
    const double factor = std::min(0.5, (n - 1000.0) / 5500.0);
    for (long f = 0; f <= stop_frame_; ++f)
      weight[f] = (1.0 - factor) + factor * static_cast<double>(f) / static_cast<double>(n);
  }
  double sum = 0, total_weight = 0;
  for (long first = start_frame_; first <= stop_frame_; first += kSyllableFrames / 2) {
    double syllable = 0;
    for (long f = first; f < first + kSyllableFrames && f <= stop_frame_; ++f)
      syllable += std::pow(frames[f], p_syllable);
    syllable = std::pow(syllable / kSyllableFrames, 1.0 / p_syllable);
    const double w = weight[first - start_frame_];
    sum += std::pow(w * syllable, p_time);
    total_weight += std::pow(w, p_time);
  }
  return std::pow(sum / total_weight, 1.0 / p_time);
}

double PerceptualModel::raw_mos() {
  frame_range();
  if (stop_frame_ < 0) return 4.5;
  spectra();
  compensate_frequency_response();
  const long frames = stop_frame_ + 1;
  ref_audible_.assign(frames, 0.0);
  symmetric_.assign(frames, 0.0);
  asymmetric_.assign(frames, 0.0);
  disturbances(0, frames, /*keep_smaller=*/false);
  skip_delay_jumps();
  if (std::any_of(symmetric_.begin(), symmetric_.end(), [](double d) { return d > kBadFrame; }))
    realign_bad_intervals();
  for (long f = 0; f < frames; ++f) {
    // Disturbances weigh less in loud frames.
    const double h = std::pow((ref_audible_[f] + 1e5) / 1e7, 0.04);
    symmetric_[f] = std::min(symmetric_[f] / h, 45.0);
    asymmetric_[f] = std::min(asymmetric_[f] / h, 45.0);
  }
  const double d = aggregate(symmetric_, 6.0, 2.0), a = aggregate(asymmetric_, 6.0, 2.0);
  return 4.5 - 0.1 * d - 0.0309 * a;
}

}  // namespace

double raw_mos(const PaddedSignal& reference, const PaddedSignal& degraded,
               const std::vector<Utterance>& utterances, const RateConstants& constants) {
  return PerceptualModel(reference, degraded, utterances, constants).raw_mos();
}

}  // namespace nabu::pesq_detail
