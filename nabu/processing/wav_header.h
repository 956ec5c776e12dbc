// What a RIFF/WAVE file's header says, read without its samples: corpus checks look at hundreds
// of thousands of files (nabu prepare), and a truncated file is told by comparing the data
// chunk's declared size with the bytes that are there, which libsndfile quietly clips to.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace nabu {

struct WavHeader {
  int sample_rate = 0;
  int channels = 0;
  int bits_per_sample = 0;
  int64_t frames = 0;          // samples per channel the data chunk declares
  int64_t frames_present = 0;  // samples per channel the file holds
  bool truncated() const { return frames_present < frames; }
  double seconds() const { return sample_rate > 0 ? double(frames) / sample_rate : 0.0; }
};

// Throws DataError naming the file when it cannot be read or is not a RIFF/WAVE file with a
// 'fmt ' chunk before its 'data' chunk.
WavHeader read_wav_header(const std::filesystem::path& path);

}  // namespace nabu
