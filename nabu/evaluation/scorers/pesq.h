// Perceptual evaluation of speech quality: PESQ, ITU-T P.862 (narrow band, mapped to MOS-LQO by
// P.862.1) and P.862.2 (wide band), written from the Recommendations:
//
//   both signals levelled to one power (above 300 Hz), filtered as a handset receives them
//   (P.862's IRS receive curve; P.862.2: a 100 Hz high-pass instead); the delay of the degraded
//   signal found per utterance (a crude estimate from voice-activity envelopes, refined by the
//   histogram of cross-correlation peaks of Hann frames, utterances split where the delay
//   changes); then per 50 % overlapping frame (32 ms) the Bark power densities, the reference
//   compensated for the degraded signal's long-term frequency response, the degraded one for
//   short-term gain, both warped to loudness (Zwicker), and the symmetric and asymmetric
//   disturbances (a dead zone, Lp norms over Bark bands); frames of high disturbance re-aligned;
//   aggregated over split seconds (L6) and over time (L2):
//   raw MOS = 4.5 - 0.1 d - 0.0309 a, then mapped to MOS-LQO (P.862.1, P.862.2).
//
// The tables (Bark bands, hearing threshold, filter curves and sections) are the Recommendation's.
// pesq_alignment.cpp holds the time alignment, pesq.cpp the level, filters and perceptual model.
#pragma once

#include <vector>

namespace at {
class Tensor;
}

namespace nabu {

enum class PesqBand {
  kNarrow,  // P.862 + P.862.1: at 8000 or 16000 Hz
  kWide,    // P.862.2: at 16000 Hz
};

// The band PESQ scores at `sample_rate` by default: narrow at 8 kHz, wide at 16 kHz. Other
// rates throw Error (PESQ is defined at those two).
PesqBand pesq_band_of_rate(int sample_rate);

// MOS-LQO (about 1.0 .. 4.64) of `degraded` against `reference`, both at `sample_rate` Hz.
// Throws Error naming why when a signal is shorter than 1/4 s or the reference holds no speech
// PESQ can find (as the Recommendation's implementation refuses). A silent degraded signal,
// which the Recommendation leaves undefined, scores 1.0, the bottom of the scale.
double pesq(const std::vector<double>& reference, const std::vector<double>& degraded,
            int sample_rate, PesqBand band);

// The mean PESQ over the speakers of estimates [S, N] against references [S, N], the estimates
// assigned to the references by the highest mean (validation_metric = pesq).
double pesq_of_sources(const at::Tensor& references, const at::Tensor& estimates,
                       int sample_rate);

}  // namespace nabu
