// The options of dynamic mixing (pipeline/dynamic_mixing.h), handed whole from trainer.cfg's
// dynamic_mixing_* keys (DataOptions) to every task's DynamicMixtureSet. No LibTorch: the
// trainer's options hold it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nabu/processing/channel_options.h"

namespace nabu {

// Virtual speakers (docs/dynamic_mixing.md, "Virtual speakers"): every speaker of the pool also
// speaks as `voices` virtual voices, each with a pitch and a formant shift of its own, fixed by
// the speaker's name and the voice's number (processing/voice_change.h applies them). The two
// shifts are drawn independently: a range of 0 leaves that one out and the other as it was.
struct VirtualVoiceOptions {
  int voices = 0;                  // per speaker; 0 = off
  double pitch_semitones = 0.0;    // each voice's pitch shift: +- [range / 2, range]
  double formant_semitones = 0.0;  // each voice's formant shift: +- [range / 2, range]
  double share = 0.5;              // of the sources: one of its speaker's virtual voices
  // Of the mixtures: the second source another utterance of the first source's speaker, in a
  // voice that differs from the first's (one of the two is the recorded voice), so that a
  // mixture holds one pitch with two vocal tracts, or one vocal tract at two pitches.
  double twins = 0.0;
  bool any() const { return voices > 0; }
};

struct DynamicMixingOptions {
  std::vector<std::string> source_lists;  // empty: the sources on the task's target lines
  std::vector<std::string> utt2spk;       // none, one for all lists, or one per list
  std::vector<double> shares;             // none (speakers uniform), or one weight per list
  std::vector<std::string> spk2f0;        // "speaker f0_hz" lines: none, or as utt2spk
  // Pitch-matched mixtures: this share of the mixtures take their other speakers among those
  // whose median f0 is within near_semitones of the first speaker's (needs spk2f0).
  double near_pitch = 0.0;
  double near_semitones = 3.0;
  double level_range = 5.0;               // dB: relative level of two sources in [-range, range]
  double speed_range = 0.0;  // speed perturbation: each source at a speed in [1-r, 1+r]
  ChannelOptions channels;   // channel augmentation, per source
  VirtualVoiceOptions virtual_voices;
  int64_t examples_per_epoch = 0;
  std::string segment_length = "full";  // "full" or frames: a random crop of that many frames
  uint64_t seed = 0;
};

}  // namespace nabu
