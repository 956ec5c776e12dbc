// Short-time objective intelligibility: STOI (Taal, Hendriks, Heusdens & Jensen, "An algorithm
// for intelligibility prediction of time-frequency weighted noisy speech", IEEE TASLP 2011) and
// its extended form ESTOI (Jensen & Taal, "An algorithm for predicting the intelligibility of
// speech masked by modulated noise maskers", IEEE/ACM TASLP 2016), written from the papers:
//
//   both signals at 10 kHz; 256-sample Hann frames, hop 128; frames of the clean signal more than
//   40 dB below its loudest frame are dropped from both, which are put back together by
//   overlap-add; a 512-point DFT of the same frames; 15 one-third octave bands from 150 Hz, each
//   the root of the summed bin powers; segments of 30 frames (384 ms) ending at every frame.
//   STOI: per band and segment, the processed envelope scaled to the clean one's energy and
//   clipped at 15 dB above it (signal-to-distortion ratio >= -15 dB), correlated with the clean
//   envelope; the mean over bands and segments.
//   ESTOI: per segment, both band x frame matrices normalised to zero mean and unit norm along
//   time (rows), then along frequency (columns); the mean over frames of the columns' inner
//   products; the mean over segments.
//
// Other rates are resampled to 10 kHz as the reference implementation does (MATLAB/Octave's
// resample: a Kaiser-windowed sinc, stoi.cpp). A signal with fewer than 30 frames left has no
// segment: the score is 1e-5, as the reference implementations return.
#pragma once

#include <vector>

namespace at {
class Tensor;
}

namespace nabu {

// `clean` and `processed`: one signal each, of equal length, at `sample_rate` Hz.
double stoi(const std::vector<double>& clean, const std::vector<double>& processed,
            int sample_rate, bool extended = false);

// The mean STOI (ESTOI) over the speakers of estimates [S, N] against references [S, N], the
// estimates assigned to the references by the highest mean (validation_metric = stoi, estoi).
double stoi_of_sources(const at::Tensor& references, const at::Tensor& estimates,
                       int sample_rate, bool extended);

// The 10 kHz signal STOI analyses (exposed for the tests).
std::vector<double> resample_for_stoi(const std::vector<double>& signal, int sample_rate);

}  // namespace nabu
