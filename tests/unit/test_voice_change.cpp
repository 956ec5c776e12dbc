// Virtual voices and the pitch estimate: a formant shift moves a synthetic vowel's envelope and
// keeps its harmonics, a pitch change moves the harmonics and keeps the envelope (each against
// the vowel's analytic envelope), the envelope against the cepstrum written out, the pitch
// estimate against voices of known f0 and a direct autocorrelation, and each virtual voice fixed
// by its speaker and number with its two shifts drawn apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "nabu/core/error.h"
#include "nabu/processing/pitch.h"
#include "nabu/processing/voice_change.h"

using namespace nabu;

namespace {

// The vowel's spectral envelope (linear amplitude): three formants and a floor.
double vowel_envelope(double hz) {
  auto bump = [&](double centre, double width) {
    return std::exp(-0.5 * std::pow((hz - centre) / width, 2.0));
  };
  return bump(600, 250) + 0.5 * bump(1700, 300) + 0.3 * bump(3000, 350) + 0.01;
}

// Harmonics of f0 up to 7 kHz (and below the rate's Nyquist frequency), each at the envelope's amplitude at its frequency (a source-filter
// vowel with a flat source), fixed random phases; int16 scale.
torch::Tensor vowel(double f0, int64_t length, int rate,
                    double (*envelope)(double) = vowel_envelope) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> phase(0.0, 2 * M_PI);
  std::vector<double> x(static_cast<std::size_t>(length), 0.0);
  for (int h = 1; h * f0 < std::min(7000.0, rate / 2.0 - 200); ++h) {
    const double a = 3000.0 * envelope(h * f0), p = phase(rng);
    for (int64_t n = 0; n < length; ++n) x[n] += a * std::sin(2 * M_PI * h * f0 * n / rate + p);
  }
  return torch::tensor(x, torch::kFloat64);
}

// The amplitude (dB) of each harmonic of f0 between 200 Hz and max_hz in the middle of x: the
// peak of a Hann-windowed spectrum within 3 % of the harmonic's frequency.
std::vector<double> harmonic_levels_db(const torch::Tensor& x, double f0, int rate,
                                       std::vector<double>* frequencies, double max_hz) {
  const int64_t n = x.size(0) / 2;
  auto middle = x.slice(0, x.size(0) / 4, x.size(0) / 4 + n);
  auto window = 0.5 - 0.5 * torch::cos(2 * M_PI * torch::arange(n, torch::kFloat64) / n);
  auto magnitude = torch::fft::rfft(middle * window).abs();
  const double bin_hz = static_cast<double>(rate) / n;
  std::vector<double> levels;
  for (int h = 1; h * f0 < max_hz; ++h) {
    if (h * f0 < 200) continue;
    const int64_t lo = std::llround(h * f0 * 0.97 / bin_hz), hi = std::llround(h * f0 * 1.03 / bin_hz);
    levels.push_back(20 * std::log10(magnitude.slice(0, lo, hi + 1).max().item<double>() + 1e-9));
    frequencies->push_back(h * f0);
  }
  return levels;
}

// The RMS difference in dB between measured levels and an envelope at the same frequencies,
// after the best common gain (the mean difference) is taken out.
double envelope_error_db(const std::vector<double>& levels, const std::vector<double>& hz,
                         double (*envelope)(double), double warp) {
  std::vector<double> difference;
  double mean = 0;
  for (std::size_t i = 0; i < levels.size(); ++i) {
    difference.push_back(levels[i] - 20 * std::log10(envelope(hz[i] / warp)));
    mean += difference.back() / levels.size();
  }
  double sum = 0;
  for (double d : difference) sum += (d - mean) * (d - mean);
  return std::sqrt(sum / difference.size());
}

}  // namespace

TEST(VoiceChange, FormantShiftMovesTheEnvelopeAndKeepsThePitch) {
  for (int rate : {8000, 16000}) {
    SCOPED_TRACE(rate);
    auto x = vowel(120, rate, rate);
    EXPECT_TRUE(torch::equal(shift_formants(x, 1.0, rate), x));
    for (double factor : {0.85, 1.2}) {
      SCOPED_TRACE(factor);
      auto y = shift_formants(x, factor, rate);
      ASSERT_EQ(y.size(0), x.size(0));
      std::vector<double> hz;
      auto levels = harmonic_levels_db(y, 120, rate, &hz, 0.45 * rate);
      // The harmonics (up to the band the envelope can move into) follow the moved envelope.
      std::vector<double> kept_levels, kept_hz;
      for (std::size_t i = 0; i < hz.size(); ++i)
        if (hz[i] / factor < 0.45 * rate) kept_levels.push_back(levels[i]), kept_hz.push_back(hz[i]);
      const double moved = envelope_error_db(kept_levels, kept_hz, vowel_envelope, factor);
      const double unmoved = envelope_error_db(kept_levels, kept_hz, vowel_envelope, 1.0);
      EXPECT_LT(moved, 3.0);
      EXPECT_GT(unmoved, 2.0 * moved);
      // The pitch stays.
      EXPECT_NEAR(estimate_pitch(y, rate).median_f0_hz, estimate_pitch(x, rate).median_f0_hz, 2.5);
    }
  }
}

TEST(VoiceChange, PitchChangeMovesTheHarmonicsAndKeepsTheEnvelope) {
  const int rate = 16000;
  auto x = vowel(120, rate, rate);
  // Up to 4.5 kHz: the vowel's harmonics end at 7 kHz, 5.6 kHz once played at 0.8 times.
  for (double pitch : {0.8, 1.25}) {
    SCOPED_TRACE(pitch);
    const int64_t length = static_cast<int64_t>(std::floor(rate / pitch));
    auto y = change_voice(x, {pitch, 1.0}, 1.0, rate, length);
    ASSERT_EQ(y.size(0), length);
    EXPECT_NEAR(estimate_pitch(y, rate).median_f0_hz, 120 * pitch, 0.03 * 120 * pitch);
    std::vector<double> hz;
    auto levels = harmonic_levels_db(y, 120 * pitch, rate, &hz, 4500);
    const double kept = envelope_error_db(levels, hz, vowel_envelope, 1.0);
    const double moved = envelope_error_db(levels, hz, vowel_envelope, pitch);
    EXPECT_LT(kept, 3.0);
    EXPECT_GT(moved, 2.0 * kept);
    // Played faster alone (sox's speed), the envelope moves with the harmonics.
    auto faster = change_speed(x, pitch, length);
    std::vector<double> speed_hz;
    auto speed_levels = harmonic_levels_db(faster, 120 * pitch, rate, &speed_hz, 4500);
    EXPECT_LT(envelope_error_db(speed_levels, speed_hz, vowel_envelope, pitch), 1.5);
  }
  // Both at once, with a speed perturbation on top: pitch x speed x pitch factor, formants x
  // speed x formant factor.
  const double speed = 1.05;
  const VoiceChange change{0.9, 1.15};
  const int64_t length = static_cast<int64_t>(std::floor(rate / (speed * change.pitch)));
  auto y = change_voice(x, change, speed, rate, length);
  ASSERT_EQ(y.size(0), length);
  const double f0 = 120 * speed * change.pitch;
  EXPECT_NEAR(estimate_pitch(y, rate).median_f0_hz, f0, 0.03 * f0);
  std::vector<double> hz;
  auto levels = harmonic_levels_db(y, f0, rate, &hz, 4500);
  EXPECT_LT(envelope_error_db(levels, hz, vowel_envelope, speed * change.formant), 3.0);
}

TEST(VoiceChange, EnvelopeIsTheLifteredCepstrumWrittenOut) {
  const int64_t nfft = 64, bins = nfft / 2 + 1, lifter = 5;
  auto log_magnitude = torch::randn({3, bins}, torch::kFloat64);
  auto fast = log_envelope(log_magnitude, lifter);
  ASSERT_EQ(fast.sizes(), log_magnitude.sizes());
  auto l = log_magnitude.accessor<double, 2>();
  for (int64_t t = 0; t < 3; ++t) {
    // The real cepstrum of the even spectrum, c[q] = 1/N sum_k L[k] cos(2 pi k q / N).
    std::vector<double> full(nfft), c(nfft, 0.0);
    for (int64_t k = 0; k < nfft; ++k) full[k] = l[t][k < bins ? k : nfft - k];
    for (int64_t q = 0; q < nfft; ++q)
      for (int64_t k = 0; k < nfft; ++k) c[q] += full[k] * std::cos(2 * M_PI * k * q / nfft) / nfft;
    for (int64_t k = 0; k < bins; ++k) {
      double envelope = 0;
      for (int64_t q = 0; q < nfft; ++q)
        if (q <= lifter || q >= nfft - lifter) envelope += c[q] * std::cos(2 * M_PI * k * q / nfft);
      EXPECT_NEAR(fast[t][k].item<double>(), envelope, 1e-9);
    }
  }
  // The true envelope lies on or above the spectrum's smoothing, and each iteration raises it.
  auto once = true_log_envelope(log_magnitude, lifter, 1);
  auto twice = true_log_envelope(log_magnitude, lifter, 2);
  EXPECT_TRUE(torch::equal(true_log_envelope(log_magnitude, lifter, 0), fast));
  EXPECT_TRUE(torch::allclose(once, log_envelope(torch::maximum(log_magnitude, fast), lifter)));
  EXPECT_GT(once.mean().item<double>(), fast.mean().item<double>());
  EXPECT_GT(twice.mean().item<double>(), once.mean().item<double>());
  EXPECT_THROW(log_envelope(log_magnitude, nfft / 2), Error);
  EXPECT_THROW(shift_formants(torch::ones({100}, torch::kFloat64), 0.0, 8000), Error);
}

TEST(VirtualVoice, IsFixedByItsSpeakerAndNumberAndItsShiftsAreDrawnApart) {
  EXPECT_TRUE(virtual_voice("spk1", 0, 4, 3).is_identity());
  std::vector<double> pitches;
  for (int voice = 1; voice <= 40; ++voice) {
    auto both = virtual_voice("spk1", voice, 4, 3);
    auto again = virtual_voice("spk1", voice, 4, 3);
    EXPECT_EQ(both.pitch, again.pitch);
    EXPECT_EQ(both.formant, again.formant);
    const double pitch_semitones = std::abs(12 * std::log2(both.pitch));
    const double formant_semitones = std::abs(12 * std::log2(both.formant));
    EXPECT_GE(pitch_semitones, 2.0 - 1e-12);
    EXPECT_LE(pitch_semitones, 4.0 + 1e-12);
    EXPECT_GE(formant_semitones, 1.5 - 1e-12);
    EXPECT_LE(formant_semitones, 3.0 + 1e-12);
    // Without one of the shifts, the other stays as it was.
    auto pitch_only = virtual_voice("spk1", voice, 4, 0);
    auto formant_only = virtual_voice("spk1", voice, 0, 3);
    EXPECT_EQ(pitch_only.pitch, both.pitch);
    EXPECT_EQ(pitch_only.formant, 1.0);
    EXPECT_EQ(formant_only.formant, both.formant);
    EXPECT_EQ(formant_only.pitch, 1.0);
    pitches.push_back(both.pitch);
  }
  // Other speakers, other voices; both signs occur.
  EXPECT_NE(virtual_voice("spk2", 1, 4, 3).pitch, virtual_voice("spk1", 1, 4, 3).pitch);
  int higher = 0;
  for (double p : pitches) higher += p > 1;
  EXPECT_GT(higher, 8);
  EXPECT_LT(higher, 32);
}

namespace {

// The definition in loops: 40 ms frames every 20 ms, speech within 30 dB of the loudest, each
// frame's autocorrelation of its Hann-windowed samples, voiced above 0.5 at a lag of 60-400 Hz.
double reference_median_f0(const std::vector<double>& x, int rate) {
  const std::size_t length = rate / 25, hop = rate / 50;
  std::vector<std::vector<double>> frames;
  std::vector<double> power;
  for (std::size_t start = 0; start + length <= x.size(); start += hop) {
    std::vector<double> frame(x.begin() + start, x.begin() + start + length);
    double mean = 0, p = 0;
    for (double v : frame) mean += v / length;
    for (double& v : frame) v -= mean, p += v * v / length;
    frames.push_back(frame);
    power.push_back(p);
  }
  const double loudest = *std::max_element(power.begin(), power.end());
  std::vector<double> f0;
  for (std::size_t f = 0; f < frames.size(); ++f) {
    if (power[f] < loudest * 1e-3) continue;
    std::vector<double> w(length);
    for (std::size_t n = 0; n < length; ++n)
      w[n] = frames[f][n] * (0.5 - 0.5 * std::cos(2 * M_PI * n / (length - 1)));
    auto r = [&](std::size_t lag) {
      double sum = 0;
      for (std::size_t n = 0; n + lag < length; ++n) sum += w[n] * w[n + lag];
      return sum;
    };
    std::size_t best = rate / 400;
    for (std::size_t lag = rate / 400; lag < static_cast<std::size_t>(rate / 60); ++lag)
      if (r(lag) > r(best)) best = lag;
    if (r(best) / std::max(r(0), 1e-9) > 0.5) f0.push_back(static_cast<double>(rate) / best);
  }
  std::sort(f0.begin(), f0.end());
  const std::size_t m = f0.size() / 2;
  return f0.size() % 2 ? f0[m] : 0.5 * (f0[m - 1] + f0[m]);
}

}  // namespace

TEST(Pitch, MedianF0OfVoicesOfKnownPitchAndAgainstTheLoops) {
  for (int rate : {8000, 16000}) {
    for (double f0 : {95.0, 140.0, 210.0, 300.0}) {
      SCOPED_TRACE(std::to_string(rate) + " Hz, f0 " + std::to_string(f0));
      auto x = vowel(f0, rate, rate);
      // Silence around it, and a quiet noise: only the speech frames count.
      auto padded = torch::cat({torch::zeros({rate / 2}, torch::kFloat64), x,
                                torch::zeros({rate / 2}, torch::kFloat64)});
      auto estimate = estimate_pitch(padded, rate);
      EXPECT_NEAR(estimate.median_f0_hz, f0, 0.03 * f0);
      EXPECT_GT(estimate.voiced_share, 0.9);
      auto values = padded.contiguous();
      std::vector<double> samples(values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
      EXPECT_DOUBLE_EQ(estimate.median_f0_hz, reference_median_f0(samples, rate));
    }
  }
  // In pieces of any size, the same measure.
  auto x = vowel(140, 16000, 16000);
  auto values = x.contiguous();
  std::vector<double> all(values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
  PitchTracker tracker(16000);
  for (std::size_t start = 0, piece = 1; start < all.size(); start += piece, piece = piece * 3 + 7)
    tracker.push(std::vector<double>(all.begin() + start,
                                     all.begin() + std::min(all.size(), start + piece)));
  const auto whole = estimate_pitch(x, 16000), pieces = tracker.result();
  EXPECT_EQ(pieces.median_f0_hz, whole.median_f0_hz);
  EXPECT_EQ(pieces.speech_frames, whole.speech_frames);
  EXPECT_EQ(pieces.voiced_share, whole.voiced_share);
  // Noise is not voiced; silence and a too short signal give nothing.
  auto noise = torch::randn({8000}, torch::kFloat64) * 1000;
  EXPECT_LT(estimate_pitch(noise, 8000).voiced_share, 0.2);
  EXPECT_EQ(estimate_pitch(torch::zeros({8000}, torch::kFloat64), 8000).median_f0_hz, 0.0);
  EXPECT_EQ(estimate_pitch(torch::ones({100}, torch::kFloat64), 8000).median_f0_hz, 0.0);
  EXPECT_NEAR(semitones_apart(100, 200), 12.0, 1e-12);
  EXPECT_TRUE(std::isinf(semitones_apart(0, 200)));
}
