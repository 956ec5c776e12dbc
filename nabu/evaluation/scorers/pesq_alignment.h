// The parts of PESQ (pesq.h) that pesq.cpp and pesq_alignment.cpp share: the padded signal, the
// rate's constants, a radix-2 FFT, and the time alignment of the degraded signal per utterance.
#pragma once

#include <complex>
#include <vector>

namespace nabu::pesq_detail {

// Windows of this many envelope frames are searched around each utterance, and the signals
// carry as many frames of zeros before and after them (the Recommendation's SEARCHBUFFER).
constexpr long kSearchFrames = 75;
constexpr long kPaddingMs = 320;  // zeros after the signal (DATAPADDING_MSECS)

struct RateConstants {
  int rate = 8000;
  long downsample = 32;   // samples per envelope frame (4 ms)
  long align_nfft = 512;  // frame of the fine alignment (64 ms)
  long search_samples() const { return kSearchFrames * downsample; }
  long padding_samples() const { return kPaddingMs * rate / 1000; }
};

const RateConstants& rate_constants(int sample_rate);  // 8000 or 16000

// A signal as PESQ pads it: search_samples() zeros, the signal, padding_samples() +
// search_samples() zeros. `samples` counts the signal with both search buffers (not the
// padding); `vad` and `log_vad` are its voice-activity envelope, one value per downsample.
struct PaddedSignal {
  std::vector<double> data;
  long samples = 0;
  std::vector<double> vad, log_vad;
};

// One utterance of the reference (in envelope frames) and the delay of the degraded signal in it
// (in samples): the crude estimate, the refined delay and its confidence.
struct Utterance {
  long search_start = 0, search_end = 0;
  long start = 0, end = 0;
  long delay_estimate = 0, delay = 0;
  double confidence = 0;
};

// In-place complex FFT of a power-of-two length; the inverse divides by the length.
void fft(std::vector<std::complex<double>>& x, bool inverse);

// The voice-activity envelope of `signal` (its filtered data): vad and log_vad.
void voice_activity(PaddedSignal& signal, const RateConstants& constants);

// The utterances of the reference with the degraded signal's delay in each (the alignment
// filtered copies, with their envelopes). Empty when the reference holds no utterance.
std::vector<Utterance> align_utterances(const PaddedSignal& reference,
                                        const PaddedSignal& degraded,
                                        const RateConstants& constants);

}  // namespace nabu::pesq_detail
