// Recording channels for channel augmentation (docs/dynamic_mixing.md, "Channels"): a room, a
// microphone's spectral tilt, the telephone band, and the GSM 06.10 and Codec 2 codecs, applied
// to one signal. Dynamic mixing draws a channel per source (pipeline/dynamic_mixing.h).
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "nabu/processing/channel_options.h"

namespace nabu {

// One source's channel, applied in this order: room, microphone (tilt), line (band), codec.
struct Channel {
  double rt60 = 0.0;  // s; 0 = no room
  double direct_to_reverberant_db = 0.0;
  uint64_t room_seed = 0;
  double tilt_db = 0.0;
  bool telephone = false, gsm = false;
  int codec2_bitrate = 0;  // bit/s of a Codec 2 round trip; 0 = none
};
torch::Tensor apply_channel(const torch::Tensor& samples, const Channel& channel,
                            int sample_rate);

// The channel's parts, double [N] in and out, N kept.
// A room: a unit direct path, then exponentially decaying Gaussian noise (-60 dB after rt60)
// scaled to the direct-to-reverberant energy ratio; rt60 seconds long.
torch::Tensor room_response(double rt60, double direct_to_reverberant_db, int sample_rate,
                            uint64_t seed);
// x convolved with h, cut to x's length (FFT).
torch::Tensor convolve_cut(const torch::Tensor& x, const torch::Tensor& h);
// y[n] = x[n] + b x[n-1], b such that the gain at Nyquist is tilt_db above the gain at 0 Hz.
torch::Tensor spectral_tilt(const torch::Tensor& x, double tilt_db);
// 4th-order Butterworth high-pass at 300 Hz and low-pass at 3400 Hz (bilinear, prewarped).
torch::Tensor telephone_band(const torch::Tensor& x, int sample_rate);
// Encoded as GSM 06.10 and decoded again by libsndfile, in memory; int16 scale in and out.
torch::Tensor gsm_round_trip(const torch::Tensor& x, int sample_rate);
// Encoded and decoded again by libcodec2 at one of kCodec2Bitrates (8 kHz; int16 scale in and
// out). A vocoder: it keeps the pitch and the spectral envelope, not the waveform.
inline constexpr int kCodec2Bitrates[] = {3200, 2400, 1600, 1200};
torch::Tensor codec2_round_trip(const torch::Tensor& x, int bitrate);

}  // namespace nabu
