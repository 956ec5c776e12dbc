// A voice's median pitch, measured as the corpus tools measure it (tools/corpus/recorded_voices.py
// voice_features, which writes speakers.tsv's median_f0_hz and tools/speaker_f0's spk2f0): 40 ms
// frames every 20 ms, the speech frames within 30 dB of the loudest, a frame voiced where its
// normalised autocorrelation peaks above 0.5 at a lag of 60 to 400 Hz, f0 the median over the
// voiced frames. `nabu separate` uses it to say when two outputs are voices of one pitch, the
// pairs a model card names as its weak range.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace nabu {

struct PitchEstimate {
  double median_f0_hz = 0.0;   // 0 when no frame is voiced
  double voiced_share = 0.0;   // of the speech frames
  int64_t speech_frames = 0;
};

// The same measure over a signal that arrives in pieces (a separated output written block by
// block), in memory of a few numbers per 20 ms frame.
class PitchTracker {
 public:
  explicit PitchTracker(int sample_rate);
  void push(const std::vector<double>& samples);
  PitchEstimate result() const;

 private:
  int sample_rate_;
  int64_t length_, hop_;
  std::vector<double> pending_;  // samples from the next frame's start on
  std::vector<double> power_, peak_, lag_;  // per frame
};

// x: double [N] at any scale, any rate of 8 kHz or more.
PitchEstimate estimate_pitch(const torch::Tensor& x, int sample_rate);

// The distance of two pitches in semitones (|12 log2(a / b)|); infinity when either is 0.
double semitones_apart(double f0_a, double f0_b);

}  // namespace nabu
