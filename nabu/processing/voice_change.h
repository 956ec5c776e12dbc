// Virtual voices (docs/dynamic_mixing.md, "Virtual speakers"): a recorded voice given another
// pitch or another vocal-tract length, each independently of the other, so that dynamic mixing
// can pair voices of one pitch and different timbre, and the reverse.
//
// A formant shift moves the spectral envelope of every frame along frequency and keeps the
// harmonics where they are (the pitch) and the phases: the envelope is the true envelope (the
// real cepstrum below kLifterSeconds, shorter than the pitch period of any voice up to about
// 550 Hz, of the log spectrum raised to its last smoothing where it lies below, iterated: it runs
// through the harmonics' peaks, not the average of peaks and the valleys between them), and each
// frame's spectrum is multiplied by the ratio of the moved envelope to its own. A pitch change
// plays the signal `pitch` times faster (pitch, formants and tempo together, as sox's speed, by
// libsoxr) and moves the envelope back by 1 / pitch, so only the pitch and the tempo change.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace nabu {

struct VoiceChange {
  double pitch = 1.0;    // factor on the pitch (and on the tempo: N samples become N / pitch)
  double formant = 1.0;  // factor on the formant frequencies (> 1: a shorter vocal tract)
  bool is_identity() const { return pitch == 1.0 && formant == 1.0; }
};

// Virtual voice `voice` (1, 2, ...) of `speaker`: its pitch and its formant shift, each of a
// size uniform in [range / 2, range] semitones and of either sign, drawn from the speaker's name
// and the voice's number alone (the same voice in every run, whatever its seed). Both are drawn
// whatever the ranges, so a voice keeps its pitch shift when the formant range is 0 and the
// reverse. Voice 0 is the recording itself.
VoiceChange virtual_voice(const std::string& speaker, int voice, double pitch_semitones,
                          double formant_semitones);

inline constexpr double kLifterSeconds = 0.0018;
// Iterations of the true envelope: on a synthetic vowel, 4 took the shifted envelope's error from
// 3.2-3.4 dB (the cepstrum alone) to 1.0-1.8 dB, 10 no further.
inline constexpr int kTrueEnvelopeIterations = 4;
// The moved envelope is at most this many dB above or below the frame's own at any bin, so that
// a band that held only noise is not raised without bound.
inline constexpr double kMaxEnvelopeGainDb = 30.0;

// The log spectral envelope of each row of `log_magnitude` ([T, bins], bins = nfft / 2 + 1):
// its real cepstrum with the quefrencies 0 .. lifter (and their mirror) kept, transformed back.
torch::Tensor log_envelope(const torch::Tensor& log_magnitude, int64_t lifter);
// The true envelope: E = log_envelope(L), then `iterations` times E = log_envelope(max(L, E)).
torch::Tensor true_log_envelope(const torch::Tensor& log_magnitude, int64_t lifter,
                                int iterations);

// Speed perturbation as sox's `speed`: the signal played `speed` times faster (tempo, pitch and
// formants together), by resampling with libsoxr; exactly `length` samples (about N / speed; the
// resampler's total may differ from that by a sample).
torch::Tensor change_speed(const torch::Tensor& samples, double speed, int64_t length);

// x (double [N]) with its formants moved by `factor` and its pitch and length kept.
torch::Tensor shift_formants(const torch::Tensor& x, double factor, int sample_rate);

// x with its pitch times change.pitch and its formants times change.formant, played `speed`
// times faster on top (the speed perturbation: pitch, formants and tempo together); exactly
// `length` samples (about N / (speed * pitch)).
torch::Tensor change_voice(const torch::Tensor& x, const VoiceChange& change, double speed,
                           int sample_rate, int64_t length);

}  // namespace nabu
