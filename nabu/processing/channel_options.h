// What dynamic mixing does to each source's channel (processing/channels.h applies it): the
// probabilities and ranges of trainer.cfg's dynamic_mixing_* channel keys. No LibTorch: the
// trainer's options hold it.
#pragma once

namespace nabu {

// Channel augmentation (docs/dynamic_mixing.md, "Channels"): each source of a mixture through a
// recording channel of its own, as the sources of a mixture of real recordings each come from
// their own room, microphone and line. The targets are the sources as they went through it.
struct ChannelOptions {
  double reverb = 0.0;      // probability of a synthetic room response
  double tilt_range = 0.0;  // dB: spectral tilt uniform in +- this; 0 = off
  double telephone = 0.0;   // probability of the telephone band, 300-3400 Hz
  double gsm = 0.0;         // probability of a GSM 06.10 round trip (8 kHz sources only)
  double codec2 = 0.0;      // probability of a Codec 2 round trip (8 kHz sources only)
  bool any() const {
    return reverb > 0 || tilt_range > 0 || telephone > 0 || gsm > 0 || codec2 > 0;
  }
};

}  // namespace nabu
