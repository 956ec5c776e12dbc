// The options of dynamic mixing (pipeline/dynamic_mixing.h), handed whole from trainer.cfg's
// dynamic_mixing_* keys (DataOptions) to every task's DynamicMixtureSet. No LibTorch: the
// trainer's options hold it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nabu/processing/channel_options.h"

namespace nabu {

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
  int64_t examples_per_epoch = 0;
  std::string segment_length = "full";  // "full" or frames: a random crop of that many frames
  uint64_t seed = 0;
};

}  // namespace nabu
