// Audio I/O through libsndfile. Samples come back unnormalised, as the original reads them with
// scipy.io.wavfile: 16-bit PCM in int16 scale (so thresholds such as mag_thres mean the same).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace nabu {

// Full scale of 16-bit audio: samples are read and mixed at this scale (int16 values as doubles).
inline constexpr double kFullScale = 32768.0;

struct Audio {
  torch::Tensor samples;  // double [N]
  int sample_rate = 0;
};

// Reads a mono file; throws DataError naming the file for a missing, unreadable, corrupt or
// multi-channel file.
Audio read_audio(const std::string& path);
// "path" or "path begin end" (seconds, the original's slice syntax) as list-line fields.
Audio read_audio_fields(const std::vector<std::string>& fields);
// Writes a mono 32-bit float wav (as the original's reconstructions), atomically.
void write_audio(const std::string& path, const torch::Tensor& samples, int sample_rate);

}  // namespace nabu
