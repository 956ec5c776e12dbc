// Separation of signals of any length in bounded memory: the signal is cut into chunks that
// overlap, each chunk is separated on its own (features, model, reconstructor; deep clustering's
// k-means per chunk), the speakers of each chunk are matched to the previous chunk's on the
// overlap (the permutation with the largest summed correlation), and the overlap is cross-faded
// linearly. Memory holds two chunks, whatever the length.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "nabu/postprocessing/separation.h"

namespace nabu {

struct ChunkOptions {
  double chunk_seconds = 8.0;    // 0: one chunk, the whole signal
  double overlap_seconds = 1.0;  // at most half a chunk
};

class ChunkedSeparation {
 public:
  // Receives finished samples of one speaker, in order, at the model's rate (int16 scale).
  using Sink = std::function<void(int speaker, const std::vector<double>& samples)>;
  // Separates one chunk ([N] double) into [speakers, N'] with N' <= N.
  using ChunkSeparator = std::function<torch::Tensor(const torch::Tensor& samples)>;

  // Throws Error for chunk settings that cannot work (overlap of less than two frames, more
  // than half a chunk).
  ChunkedSeparation(ChunkSeparator separate, int speakers, int64_t frame_length, int sample_rate,
                    ChunkOptions options, Sink sink);
  // Chunks separated by `task` at `sample_rate`.
  ChunkedSeparation(TaskSeparation& task, int sample_rate, ChunkOptions options, Sink sink);
  // Appends samples (int16 scale, the model's rate); separates every chunk that is complete.
  void push(const std::vector<double>& samples);
  // Separates what is left and emits everything: in total exactly as many samples per speaker
  // as were pushed.
  void finish();
  int num_speakers() const { return speakers_; }
  double seconds_done() const { return static_cast<double>(emitted_) / sample_rate_; }

 private:
  void separate_chunk(bool last);
  void combine(const torch::Tensor& signals, int64_t start);
  void emit(int speaker, const double* data, int64_t count);

  ChunkSeparator separate_;
  int sample_rate_;
  int64_t chunk_ = 0, hop_ = 0, frame_ = 0;  // samples
  Sink sink_;
  int speakers_ = 0;
  std::vector<double> buffer_;
  int64_t buffer_start_ = 0;  // signal index of buffer_[0]
  int64_t pushed_ = 0;
  std::vector<std::vector<double>> pending_;  // per speaker, from pending_start_
  int64_t pending_start_ = 0;
  int64_t emitted_ = 0;  // per speaker
  bool finished_ = false;
};

// A whole signal ([N] double, int16 scale, at the model's rate) separated in chunks: [S, N].
torch::Tensor separate_in_chunks(TaskSeparation& task, const torch::Tensor& samples,
                                 int sample_rate, const ChunkOptions& options);

struct FileSeparationOptions {
  ChunkOptions chunks;
  int channel = 0;              // 1-based channel to separate; 0 = mix all channels down
  bool keep_model_rate = false;  // write at the model's rate instead of the input's
  int model_rate = 0;           // 0: the rate of the data the model was trained on
  double progress_every_seconds = 10.0;
};

struct FileSeparationReport {
  std::vector<std::filesystem::path> outputs;  // <out>/<stem>_s<k>.wav
  double audio_seconds = 0, wall_seconds = 0;
  int input_rate = 0, output_rate = 0, channels = 0;
};

// Separates one audio file of any rate, channel count and length into <out_dir>/<stem>_s<k>.wav
// (32-bit float, at the input's level: the outputs sum to about the input). Throws DataError
// naming the file for a file that cannot be read, is empty, silent, shorter than one analysis
// frame or holds NaN samples; no output file is left behind then.
FileSeparationReport separate_file(TaskSeparation& task, const std::filesystem::path& input,
                                   const std::filesystem::path& out_dir,
                                   const FileSeparationOptions& options);

}  // namespace nabu
