#include "nabu/processing/voice_change.h"

#include <cmath>
#include <random>
#include <vector>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/processing/audio_stream.h"
#include "nabu/processing/signal.h"

namespace nabu {

namespace {

// Frames of about 32 ms (a power of two: 256 samples at 8 kHz, 512 at 16 kHz) every half frame,
// sine-windowed: at half overlap the squared windows sum to one, so an unchanged spectrum gives
// back the signal.
FrameSettings voice_frames(int sample_rate) {
  int64_t frame = 1;
  while (frame < std::llround(0.032 * sample_rate)) frame <<= 1;
  FrameSettings settings;
  settings.sample_rate = sample_rate;
  settings.winlen = static_cast<double>(frame) / sample_rate;
  settings.winstep = static_cast<double>(frame / 2) / sample_rate;
  settings.winfunc = "cosine";
  settings.nfft = static_cast<int>(frame);
  return settings;
}

// Each row read at bin k / factor (linear interpolation; the last bin beyond the top).
torch::Tensor read_at_scaled_bins(const torch::Tensor& rows, double factor) {
  const int64_t bins = rows.size(1);
  auto position = (torch::arange(bins, torch::kFloat64) / factor).clamp_max(bins - 1);
  auto below = position.floor().to(torch::kLong);
  auto above = (below + 1).clamp_max(bins - 1);
  auto weight = (position - below.to(torch::kFloat64)).to(rows.scalar_type());
  return rows.index_select(1, below) * (1.0 - weight) + rows.index_select(1, above) * weight;
}

std::vector<double> voice_samples_of(const torch::Tensor& x) {
  auto contiguous = x.to(torch::kFloat64).contiguous();
  return std::vector<double>(contiguous.data_ptr<double>(),
                             contiguous.data_ptr<double>() + contiguous.numel());
}

}  // namespace

VoiceChange virtual_voice(const std::string& speaker, int voice, double pitch_semitones,
                          double formant_semitones) {
  if (voice <= 0) return {};
  std::mt19937_64 rng(stable_hash("virtual voice " + std::to_string(voice) + " of " + speaker));
  auto shift = [&](double range) {
    // A size in [range / 2, range] and a sign: never a voice all but equal to the recording.
    double size = range * (0.5 + 0.5 * static_cast<double>(rng() >> 11) * 0x1.0p-53);
    double sign = (rng() & 1) ? 1.0 : -1.0;
    return std::exp2(sign * size / 12.0);
  };
  VoiceChange change;
  change.pitch = shift(pitch_semitones);
  change.formant = shift(formant_semitones);
  return change;
}

namespace {

// The lifter as two products: the even spectrum's first lifter + 1 cepstral coefficients,
// c[q] = 1/N (L[0] + (-1)^q L[N/2] + 2 sum_k L[k] cos(2 pi k q / N)), are log_magnitude x
// `analysis` [bins, lifter + 1]; the envelope, c[0] + 2 sum_q c[q] cos(2 pi k q / N), is c x
// `synthesis` [lifter + 1, bins]. A few dozen coefficients: far cheaper than two FFTs per frame.
struct Lifter {
  torch::Tensor analysis, synthesis;
  Lifter(int64_t bins, int64_t lifter) {
    const int64_t nfft = 2 * (bins - 1);
    if (lifter < 0 || 2 * lifter >= nfft)
      throw Error("log_envelope: a lifter of " + std::to_string(lifter) + " for " +
                  std::to_string(nfft) + "-point frames");
    auto k = torch::arange(bins, torch::kFloat64).unsqueeze(1);
    auto q = torch::arange(lifter + 1, torch::kFloat64).unsqueeze(0);
    auto cosines = torch::cos(2.0 * M_PI * k * q / static_cast<double>(nfft));  // [bins, L+1]
    auto edge = torch::full({bins, 1}, 2.0, torch::kFloat64);
    edge[0][0] = 1.0;
    edge[bins - 1][0] = 1.0;  // the DC and Nyquist bins appear once in the even spectrum
    analysis = cosines * edge / static_cast<double>(nfft);
    auto twice = torch::full({1, lifter + 1}, 2.0, torch::kFloat64);
    twice[0][0] = 1.0;  // c[0] once, every other kept quefrency with its mirror
    synthesis = (cosines * twice).t().contiguous();
  }
  // In the spectrum's own precision.
  Lifter to(torch::ScalarType type) const {
    Lifter cast = *this;
    cast.analysis = analysis.to(type);
    cast.synthesis = synthesis.to(type);
    return cast;
  }
  torch::Tensor operator()(const torch::Tensor& log_magnitude) const {
    return log_magnitude.matmul(analysis).matmul(synthesis);
  }
};

}  // namespace

torch::Tensor log_envelope(const torch::Tensor& log_magnitude, int64_t lifter) {
  return Lifter(log_magnitude.size(-1), lifter).to(log_magnitude.scalar_type())(log_magnitude);
}

torch::Tensor true_log_envelope(const torch::Tensor& log_magnitude, int64_t lifter,
                                int iterations) {
  const Lifter smooth = Lifter(log_magnitude.size(-1), lifter).to(log_magnitude.scalar_type());
  auto envelope = smooth(log_magnitude);
  for (int i = 0; i < iterations; ++i) envelope = smooth(torch::maximum(log_magnitude, envelope));
  return envelope;
}

torch::Tensor shift_formants(const torch::Tensor& x, double factor, int sample_rate) {
  auto signal = x.to(torch::kFloat64).reshape({-1});
  if (!(factor > 0) || !std::isfinite(factor))
    throw Error("shift_formants: the factor must be positive (it is " + std::to_string(factor) +
                ")");
  if (factor == 1.0 || signal.numel() == 0) return signal;
  const FrameSettings settings = voice_frames(sample_rate);
  const int64_t frame = settings.frame_length(), step = settings.frame_step();
  const int64_t length = signal.size(0), lead = frame - step;
  // Zeros before and after, so that every sample lies under two whole windows. In single
  // precision (an augmentation: 1e-7 of the signal is far below what it changes), twice as fast.
  auto padded = torch::cat({torch::zeros({lead}, torch::kFloat32), signal.to(torch::kFloat32),
                            torch::zeros({frame}, torch::kFloat32)});
  auto spectrum = frames_spectrum(frame_signal(padded, settings), settings.nfft);
  auto magnitude = spectrum.abs();
  // A floor 140 dB below the loudest bin: the envelope of silence stays finite at any scale.
  const double floor = std::max(magnitude.max().item<double>() * 1e-7, 1e-30);
  auto own = true_log_envelope(torch::log(magnitude + floor),
                               std::llround(kLifterSeconds * sample_rate), kTrueEnvelopeIterations);
  const double limit = kMaxEnvelopeGainDb * std::log(10.0) / 20.0;
  auto gain = (read_at_scaled_bins(own, factor) - own).clamp(-limit, limit).exp();
  auto changed = overlap_add_inverse(spectrum * gain, settings, padded.size(0), 0.0);
  return changed.slice(0, lead, lead + length).to(torch::kFloat64);
}

torch::Tensor change_speed(const torch::Tensor& samples, double speed, int64_t length) {
  return torch::tensor(resample_whole(voice_samples_of(samples), 1000.0 * speed, 1000.0, length),
                       torch::kFloat64);
}

torch::Tensor change_voice(const torch::Tensor& x, const VoiceChange& change, double speed,
                           int sample_rate, int64_t length) {
  const double rate = speed * change.pitch;
  auto y = rate != 1.0 ? change_speed(x, rate, length) : x.to(torch::kFloat64);
  if (rate == 1.0 && y.size(0) != length)
    y = torch::constant_pad_nd(y.slice(0, 0, length), {0, std::max<int64_t>(0, length - y.size(0))});
  // Played faster, the formants moved by `rate`; the speed's share of it stays (a speed
  // perturbation moves them as another vocal tract would), the pitch's is undone.
  const double formant = change.formant / change.pitch;
  return formant != 1.0 ? shift_formants(y, formant, sample_rate) : y;
}

}  // namespace nabu
