// Audio of any length, rate and channel count in bounded memory: a block reader that mixes
// channels down (or picks one), a streaming resampler (libsoxr) and a block writer that commits
// its file only when it is complete. Used by `nabu separate` on real recordings.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace nabu {

class AudioReader {
 public:
  // Opens `path`; throws DataError naming the file when it is missing, unreadable, of a format
  // libsndfile does not know, empty, or when `channel` (1-based, 0 = mix all down) is not there.
  AudioReader(const std::filesystem::path& path, int channel = 0);
  ~AudioReader();
  AudioReader(const AudioReader&) = delete;
  AudioReader& operator=(const AudioReader&) = delete;

  int sample_rate() const { return sample_rate_; }
  int channels() const { return channels_; }
  int64_t frames() const { return frames_; }  // samples per channel
  double seconds() const { return static_cast<double>(frames_) / sample_rate_; }
  // Up to `count` mono samples in int16 scale (whatever the file's format, so features mean
  // what they meant in training); empty at the end. Throws DataError for a read error or a
  // NaN/infinite sample, naming the file and the time.
  std::vector<double> read(int64_t count);

 private:
  std::filesystem::path path_;
  void* file_ = nullptr;  // SNDFILE*
  int sample_rate_ = 0, channels_ = 0, channel_ = 0;
  int64_t frames_ = 0, position_ = 0;
  std::vector<double> interleaved_;
};

// Streaming sample-rate conversion with libsoxr (high quality). Rates equal: a pass-through.
class Resampler {
 public:
  Resampler(double input_rate, double output_rate);
  ~Resampler();
  Resampler(const Resampler&) = delete;
  Resampler& operator=(const Resampler&) = delete;
  // Converts the next block; the result may lag the input by the filter's delay.
  std::vector<double> process(const std::vector<double>& input);
  // The remaining output after the last block.
  std::vector<double> flush();

 private:
  double ratio_;
  void* soxr_ = nullptr;  // soxr_t
};

// A whole signal from `from` Hz to `to` Hz in one go (process, then flush): exactly `length`
// samples when length >= 0 (cut, or zero-padded at the end), else all the resampler gives.
std::vector<double> resample_whole(const std::vector<double>& samples, double from, double to,
                                   int64_t length = -1);

// Writes a mono 32-bit float wav block by block into a temporary file; commit() renames it into
// place. Destroyed without commit(), it leaves nothing behind.
class AudioWriter {
 public:
  AudioWriter(const std::filesystem::path& path, int sample_rate);
  ~AudioWriter();
  AudioWriter(const AudioWriter&) = delete;
  AudioWriter& operator=(const AudioWriter&) = delete;
  // Samples in [-1, 1] scale.
  void write(const std::vector<double>& samples);
  int64_t written() const { return written_; }
  void commit();

 private:
  std::filesystem::path path_, temporary_;
  void* file_ = nullptr;  // SNDFILE*
  int64_t written_ = 0;
  bool committed_ = false;
};

}  // namespace nabu
